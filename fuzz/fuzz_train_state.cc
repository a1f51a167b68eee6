// libFuzzer target: a checkpoint's state.json (runtime/exec/train_state.cc,
// parseTrainState, and the JSON parser under it, runtime/data/literal.cc).
// The input is the file's text. It is parsed twice: against a fixed
// expectation, and against one that agrees with the text's own step, model
// and seed (read with the JSON parser), so the range and agreement checks
// after them are reached too. A state it accepts must come back unchanged
// through trainStateJson → parseTrainState.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz/fuzz_file.h"
#include "runtime/data/literal.h"
#include "runtime/exec/train_state.h"

namespace {

using dtl::fuzz::broken;
using dtl::rt::TrainState;
using dtl::rt::TrainStateExpect;

void parseAndCheck(const std::string& text, const TrainStateExpect& expect) {
  TrainState s;
  std::string err;
  if (!dtl::rt::parseTrainState(text, expect, s, err)) {
    if (err.empty()) broken("parseTrainState failed without a message");
    return;
  }
  if (!err.empty()) broken("parseTrainState succeeded with a message: " + err);
  TrainState again;
  std::string json = dtl::rt::trainStateJson(s);
  if (!dtl::rt::parseTrainState(json, expect, again, err)) broken("its own JSON does not parse back: " + err + "\n" + json);
  if (again.step != s.step || again.epoch != s.epoch || again.step_in_epoch != s.step_in_epoch ||
      again.seed != s.seed || again.model != s.model || again.global_batch != s.global_batch || again.world != s.world)
    broken("a state differs after trainStateJson → parseTrainState:\n" + json);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dtl;
  std::string text(reinterpret_cast<const char*>(data), size);
  TrainStateExpect expect;
  expect.step = 10;
  expect.model = "M";
  expect.seed = 1;
  expect.samples = 1000;
  expect.global_batch = 7;
  parseAndCheck(text, expect);

  rt::data::Literal root;
  std::string err;
  if (!rt::data::parseLiteral(text, rt::data::Syntax::Json, root, err)) return 0;
  if (const rt::data::Literal* v = root.get("step"); v && v->type == rt::data::Literal::Type::Int) expect.step = v->i;
  if (const rt::data::Literal* v = root.get("seed"); v && v->type == rt::data::Literal::Type::Int) expect.seed = v->i;
  if (const rt::data::Literal* v = root.get("model"); v && v->type == rt::data::Literal::Type::String)
    expect.model = v->s;
  expect.samples = static_cast<int64_t>(size) * 1000;
  expect.global_batch = 1 + static_cast<int64_t>(size % 9);
  parseAndCheck(text, expect);
  return 0;
}
