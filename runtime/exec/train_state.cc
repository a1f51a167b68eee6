// state.json: written with core/json.h, read with the data literal parser;
// every field checked for type, range and agreement with the resuming run.
#include "runtime/exec/train_state.h"

#include <algorithm>
#include <set>

#include "core/json.h"
#include "runtime/data/literal.h"

namespace dtl::rt {

using data::Literal;

std::string trainStateJson(const TrainState& s) {
  json::Writer w;
  w.beginObject().key("step").value(s.step).key("epoch").value(s.epoch).key("step_in_epoch").value(s.step_in_epoch);
  w.key("seed").value(s.seed).key("model").value(s.model);
  // The cursor counts global batches of this many samples; a run on another
  // number of ranks converts it (the trainer's resume). 0 (not recorded, as
  // in a state read from an older checkpoint) is left out, as such a file
  // leaves it out: parseTrainState refuses a written 0.
  if (s.global_batch > 0) w.key("global_batch").value(s.global_batch);
  w.key("world").value(s.world);
  if (s.skipped_steps > 0) w.key("skipped_steps").value(s.skipped_steps);  // absent in older files: none
  w.endObject();
  return w.str();
}

namespace {

// An integer field at least `min`; absent is an error unless `optional`.
bool integer(const Literal& root, const char* key, int64_t min, bool optional, int64_t& out, std::string& err) {
  const Literal* v = root.get(key);
  if (!v) {
    if (!optional) err = std::string("\"") + key + "\" is missing";
    return optional;
  }
  if (v->type != Literal::Type::Int || v->i < min) {
    err = std::string("\"") + key + "\" is " + (v->type == Literal::Type::Int ? std::to_string(v->i) : "not an integer") +
          "; it must be an integer from " + std::to_string(min);
    return false;
  }
  out = v->i;
  return true;
}

}  // namespace

bool parseTrainState(const std::string& text, const TrainStateExpect& expect, TrainState& out, std::string& err) {
  Literal root;
  std::string perr;
  if (!data::parseLiteral(text, data::Syntax::Json, root, perr)) {
    err = "not valid JSON (" + perr + ")";
    return false;
  }
  if (root.type != Literal::Type::Dict) {
    err = "not a JSON object";
    return false;
  }
  static const std::set<std::string> known = {"step", "epoch", "step_in_epoch", "seed", "model", "global_batch", "world",
                                             "skipped_steps"};
  for (const std::string& k : root.keys)
    if (!known.count(k)) {
      err = "unknown field \"" + k + "\" (this build writes step, epoch, step_in_epoch, seed, model, global_batch, world, skipped_steps)";
      return false;
    }
  TrainState s;
  if (!integer(root, "step", 0, false, s.step, err) || !integer(root, "epoch", 0, false, s.epoch, err) ||
      !integer(root, "step_in_epoch", 0, false, s.step_in_epoch, err) || !integer(root, "seed", 0, false, s.seed, err) ||
      !integer(root, "global_batch", 1, true, s.global_batch, err) || !integer(root, "world", 1, true, s.world, err) ||
      !integer(root, "skipped_steps", 0, true, s.skipped_steps, err))
    return false;
  const Literal* model = root.get("model");
  if (!model || model->type != Literal::Type::String) {
    err = model ? "\"model\" is not a string" : "\"model\" is missing";
    return false;
  }
  s.model = model->s;
  if (s.step != expect.step) {
    err = "\"step\" is " + std::to_string(s.step) + " but the checkpoint is of step " + std::to_string(expect.step);
    return false;
  }
  if (s.skipped_steps > s.step) {
    err = "\"skipped_steps\" is " + std::to_string(s.skipped_steps) + ", more than the " + std::to_string(s.step) +
          " steps taken";
    return false;
  }
  if (s.model != expect.model) {
    err = "the checkpoint is of model `" + s.model + "`, this spec trains `" + expect.model + "`";
    return false;
  }
  if (s.seed != expect.seed) {
    err = "the checkpoint's run had seed " + std::to_string(s.seed) + ", this spec has " + std::to_string(expect.seed) +
          " (another data order: the run would not continue)\nhint: --set train.seed=" + std::to_string(s.seed) +
          " continues it";
    return false;
  }
  int64_t batch = s.global_batch > 0 ? s.global_batch : std::max<int64_t>(1, expect.global_batch);
  if (s.step_in_epoch > expect.samples / batch) {
    err = "\"step_in_epoch\" is " + std::to_string(s.step_in_epoch) + ", but an epoch of the " +
          std::to_string(expect.samples) + " training samples holds " + std::to_string(expect.samples / batch) +
          " global batches of " + std::to_string(batch);
    return false;
  }
  out = s;
  return true;
}

}  // namespace dtl::rt
