// NaN and ±inf through every kernel, forward and backward, on both backends,
// against PyTorch 1.13: the cases and their expected values are the goldens
// tests/golden/nonfinite/<kernel>.txt written by tests/parity/nonfinite_cases.py
// (which also rechecks them against torch: ctest nonfinite.goldens_match_torch).
// NaN positions and infinities must match exactly, finite values to 1e-5
// relative; integer results exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/unit/backend_test_util.h"

namespace dtl::rt::testing {
namespace {

using ir::Node;
using ir::Op;

const char* const kGoldenDir = DTL_SOURCE_DIR "/tests/golden/nonfinite/";

struct GoldenCase {
  std::string label;
  Node node;
  RunContext ctx;
  std::vector<Buf> inputs;
  std::vector<double> expect;
};

Op opNamed(const std::string& name) {
  for (int k = 0; k <= static_cast<int>(Op::ReduceScatter); ++k)
    if (name == ir::opName(static_cast<Op>(k))) return static_cast<Op>(k);
  ADD_FAILURE() << "unknown op " << name;
  return Op::Const;
}

// "a=2 b=3" (possibly empty: a scalar).
Shape shapeOf(std::istringstream& in) {
  Shape s;
  std::string tok;
  while (in >> tok && tok != ":") {
    size_t eq = tok.find('=');
    s.dims.push_back({tok.substr(0, eq), std::stoll(tok.substr(eq + 1))});
  }
  return s;
}

std::vector<double> numbers(std::istringstream& in) {
  std::vector<double> v;
  std::string tok;
  while (in >> tok) v.push_back(std::strtod(tok.c_str(), nullptr));  // strtod reads nan, inf, -inf
  return v;
}

Buf inputOf(std::istringstream& in) {
  std::string kind;
  in >> kind;
  Shape s = shapeOf(in);
  Buf b(s, kind == "f32" ? DType::F32 : DType::I32);
  std::vector<double> v = numbers(in);
  EXPECT_EQ(static_cast<int64_t>(v.size()), b.size()) << "input " << s.str();
  for (size_t k = 0; k < v.size() && static_cast<int64_t>(k) < b.size(); ++k) {
    if (b.dtype == DType::F32) b.f[k] = static_cast<float>(v[k]);
    else b.i[k] = static_cast<int32_t>(v[k]);
  }
  return b;
}

// Applies one "key value…" line of a case.
void applyLine(const std::string& key, std::istringstream& in, GoldenCase& c) {
  std::string word;
  if (key == "op" && in >> word) c.node.op = opNamed(word);
  else if (key == "fn") in >> c.node.fn;
  else if (key == "names") while (in >> word) c.node.names.push_back(word);
  else if (key == "scalar") c.node.scalar = numbers(in).at(0);
  else if (key == "flag") in >> c.node.flag;
  else if (key == "index") in >> c.node.index;
  else if (key == "id") in >> c.node.id;
  else if (key == "seed") in >> c.ctx.seed;
  else if (key == "shape") c.node.shape = shapeOf(in);
  else if (key == "dtype" && in >> word) c.node.dtype = parseDType(word).value();
  else if (key == "in") c.inputs.push_back(inputOf(in));
  else if (key == "out") c.expect = numbers(in);
  else ADD_FAILURE() << "unknown golden line " << key;
}

std::vector<GoldenCase> loadGolden(const std::string& kernel) {
  std::ifstream f(kGoldenDir + kernel + ".txt");
  EXPECT_TRUE(f.good()) << "no golden " << kGoldenDir << kernel << ".txt";
  std::vector<GoldenCase> cases;
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream in(line);
    std::string key;
    in >> key;
    if (key == "case") {
      cases.emplace_back();
      in >> cases.back().label;
      cases.back().node.id = 7;
    } else if (key != "end") {
      applyLine(key, in, cases.back());
    }
  }
  return cases;
}

// NaN where torch has NaN, the same infinity, finite within rtol 1e-5 (plus
// 1e-6 absolute for values that are 0 in exact arithmetic).
::testing::AssertionResult matches(const Buf& got, const std::vector<double>& want) {
  if (got.size() != static_cast<int64_t>(want.size()))
    return ::testing::AssertionFailure() << got.size() << " elements, golden has " << want.size();
  for (size_t k = 0; k < want.size(); ++k) {
    double a = isFloat(got.dtype) ? got.f[k] : got.i[k], b = want[k];
    bool ok = std::isnan(b)   ? std::isnan(a)
              : std::isinf(b) ? a == b
                              : std::isfinite(a) && std::fabs(a - b) <= 1e-5 * std::fabs(b) + 1e-6;
    if (!ok) return ::testing::AssertionFailure() << "element " << k << ": got " << a << ", torch " << b;
  }
  return ::testing::AssertionSuccess();
}

// Attention is a node of several results: the forward gives out and lse, and
// the golden's AttentionGrad case (inputs q, k, v, dy; index = which of dq,
// dk, dv) is the one backward node fed with this backend's own out and lse.
Outcome runAttention(Backend& be, const GoldenCase& c, std::vector<Buf*> in) {
  Node fwd = c.node;
  fwd.op = Op::Attention;
  fwd.shape = c.inputs.at(0).shape;
  Shape lse = fwd.shape;
  lse.dims.pop_back();
  fwd.results = {ir::Result{lse, DType::F32}};
  Outcomes f = runResults(be, fwd, {in[0], in[1], in[2]}, c.ctx);
  if (!f.status.ok || c.node.op == Op::Attention) return {f.status, f.status.ok ? f.out.at(0) : Buf{}};
  Node bwd = c.node;
  bwd.shape = c.inputs.at(0).shape;
  bwd.results = {ir::Result{c.inputs.at(1).shape, DType::F32}, ir::Result{c.inputs.at(2).shape, DType::F32}};
  Outcomes b = runResults(be, bwd, {in[0], in[1], in[2], &f.out[0], &f.out[1], in[3]}, c.ctx);
  return {b.status, b.status.ok ? b.out.at(static_cast<size_t>(c.node.index)) : Buf{}};
}

void checkKernel(const std::string& kernel) {
  std::vector<GoldenCase> cases = loadGolden(kernel);
  ASSERT_FALSE(cases.empty()) << kernel;
  std::unique_ptr<Backend> backends[] = {makeReferenceBackend(), makeFastBackend()};
  for (GoldenCase& c : cases) {
    std::vector<Buf*> in;
    for (Buf& b : c.inputs) in.push_back(&b);
    for (auto& be : backends) {
      const bool attention = c.node.op == Op::Attention || c.node.op == Op::AttentionGrad;
      Outcome o = attention ? runAttention(*be, c, in) : runNode(*be, c.node, in, c.ctx);
      ASSERT_TRUE(o.status.ok) << c.label << " on " << be->name() << ": " << o.status.message;
      EXPECT_TRUE(matches(o.out, c.expect)) << c.label << " on the " << be->name() << " backend";
    }
  }
}

// One test per kernel; GoldensAreAllTested keeps this list and the files in step.
const std::vector<std::string>& testedKernels() {
  static const std::vector<std::string> k = {
      "relu",        "gelu",          "gelu_tanh",  "silu",       "tanh",      "sigmoid",   "exp",
      "log",         "sqrt",          "rsqrt",      "neg",        "abs",       "arithmetic", "compare",
      "contract",    "reduce_sum",    "reduce_mean", "reduce_max", "reduce_to", "argmax",    "softmax",
      "log_softmax", "normalize",     "rms_normalize", "cross_entropy", "embed", "attention", "dropout"};
  return k;
}

TEST(NonFinite, Relu) { checkKernel("relu"); }
TEST(NonFinite, Gelu) { checkKernel("gelu"); }
TEST(NonFinite, GeluTanh) { checkKernel("gelu_tanh"); }
TEST(NonFinite, Silu) { checkKernel("silu"); }
TEST(NonFinite, Tanh) { checkKernel("tanh"); }
TEST(NonFinite, Sigmoid) { checkKernel("sigmoid"); }
TEST(NonFinite, Exp) { checkKernel("exp"); }
TEST(NonFinite, Log) { checkKernel("log"); }
TEST(NonFinite, Sqrt) { checkKernel("sqrt"); }
TEST(NonFinite, Rsqrt) { checkKernel("rsqrt"); }
TEST(NonFinite, Neg) { checkKernel("neg"); }
TEST(NonFinite, Abs) { checkKernel("abs"); }
TEST(NonFinite, Arithmetic) { checkKernel("arithmetic"); }
TEST(NonFinite, Compare) { checkKernel("compare"); }
TEST(NonFinite, Contract) { checkKernel("contract"); }
TEST(NonFinite, ReduceSum) { checkKernel("reduce_sum"); }
TEST(NonFinite, ReduceMean) { checkKernel("reduce_mean"); }
TEST(NonFinite, ReduceMax) { checkKernel("reduce_max"); }
TEST(NonFinite, ReduceTo) { checkKernel("reduce_to"); }
TEST(NonFinite, Argmax) { checkKernel("argmax"); }
TEST(NonFinite, Softmax) { checkKernel("softmax"); }
TEST(NonFinite, LogSoftmax) { checkKernel("log_softmax"); }
TEST(NonFinite, Normalize) { checkKernel("normalize"); }
TEST(NonFinite, RmsNormalize) { checkKernel("rms_normalize"); }
TEST(NonFinite, CrossEntropy) { checkKernel("cross_entropy"); }
TEST(NonFinite, Embed) { checkKernel("embed"); }
TEST(NonFinite, Attention) { checkKernel("attention"); }
TEST(NonFinite, Dropout) { checkKernel("dropout"); }

// A golden without a TEST (or a TEST without its golden) fails here.
TEST(NonFinite, GoldensAreAllTested) {
  std::set<std::string> tested(testedKernels().begin(), testedKernels().end()), files;
  for (const auto& e : std::filesystem::directory_iterator(kGoldenDir))
    if (e.path().extension() == ".txt") files.insert(e.path().stem().string());
  EXPECT_EQ(files, tested);
}

}  // namespace
}  // namespace dtl::rt::testing
