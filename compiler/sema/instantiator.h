// The model instantiator, shared by the files of stage 5 (it is not an
// interface for other stages: they call instantiateModel). Its methods live
// by topic: instances and parameters (instantiate_model.cc), sub-layers and
// their arguments (instantiate_layers.cc), dim sizes (evaluate_dims.cc),
// expressions and forward calls (evaluate_expr.cc), and the trace of tensor
// operations it hands to lowering (record_ops.cc).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "compiler/sema/program.h"
#include "compiler/sema/spec.h"
#include "compiler/sema/values.h"

namespace dtl::sema {

inline constexpr int kMaxLayerDepth = 32;
inline constexpr int kMaxCallDepth = 64;
// A layer that holds or calls another twice, nested, doubles the work per
// level; these totals keep such a spec from running for hours. (The samples
// take at most 152 evaluation steps.)
inline constexpr int kMaxInstances = 10000;
inline constexpr int64_t kMaxEvalSteps = 50000;

struct Frame {
  Instance* inst;
  const std::map<std::string, Value>* locals;  // forward params + lets; may be null
};

class Instantiator {
 public:
  Instantiator(const Program& prog, int64_t batch, Model& out, diag::Diagnostics& diags);
  void run();

 private:
  using Expr = syntax::Expr;

  // ---- the model and its instances (instantiate_model.cc) ----
  void describeModel();
  const syntax::Binding* evaluateLoss();
  void evaluateBindings(const syntax::Binding* loss);
  void countParameters();
  void setup(Instance& inst);
  void modelInputs(Instance& inst, Frame& self);
  void param(Instance& inst, const syntax::ParamDecl& p, Frame& self);
  std::string initText(const Expr& e, Frame& self);
  bool tensorType(const syntax::TensorType& tt, Frame& self, const std::string& what, Shape& s, DType& t);
  void noteOutsideSpec(size_t first_error, Loc here, const std::string& message);

  // ---- sub-layers (instantiate_layers.cc) ----
  bool isSubLayer(const Expr& e, const Instance& inst);
  void subLayer(Instance& parent, const syntax::Binding& b, Frame& self);
  const Expr* repeatStack(const Expr& call, Frame& self, std::vector<Dim>& stack);
  bool enterLayer(const Expr& call, const syntax::LayerDecl& decl);
  bool bindLayerArgs(const Expr& call, const syntax::LayerDecl& decl, Frame& caller, Instance& inst);

  // ---- dim sizes (evaluate_dims.cc) ----
  bool dimValue(const std::string& name, const Expr& e, Frame& f, int64_t& out);
  bool intExpr(const Expr& e, Frame& f, int64_t& out);
  bool intName(const Expr& e, Frame& f, int64_t& out);
  bool intBinary(const Expr& e, Frame& f, int64_t& out);

  // ---- expressions (evaluate_expr.cc) ----
  Value lookup(const std::string& name, Frame& f, Loc loc);
  Value globalName(const std::string& name);
  Value binding(Instance& inst, const std::string& name, Loc use);
  Value eval(const Expr& e, Frame& f);
  Value unary(const Expr& e, Frame& f);
  Value tuple(const Expr& e, Frame& f);
  Value member(const Expr& e, Frame& f);
  Value binary(const Expr& e, Frame& f);
  std::optional<Value> fold(const std::string& op, const Value& a, const Value& b, Loc loc);
  Value call(const Expr& e, Frame& f);
  Value callPrimitive(const Expr& e, const std::string& fn, Frame& f);
  Value callLayer(const Expr& e, Instance& inst, Frame& f);
  bool forwardArgs(const Expr& e, const syntax::LayerDecl& decl, Frame& f, std::vector<Value>& args);
  Value forwardBody(const Expr& e, Instance& inst, const syntax::Forward& fw, const std::vector<Value>& args);

  // ---- the trace for lowering (record_ops.cc) ----
  int openBlock();
  void closeBlock();
  TraceStep& record(TraceStep step);
  Value recordInput(const std::string& name, Value v, Loc loc);
  Value recordParam(const Instance& inst, const std::string& name, size_t depth, Value v);
  Value recordBinary(const std::string& op, const Value& a, const Value& b, Value out, Loc loc);
  Value recordUnary(const std::string& fn, Value x, Loc loc);
  Value recordPrimitive(const std::string& fn, const std::vector<std::optional<Value>>& args, Value out, Loc loc);
  Value recordReplay(int block, Value v, Loc loc);
  TraceStep openCall(const Instance& inst, size_t outer, std::vector<Value>& args, Loc loc);
  Value closeCall(TraceStep step, Value out);

  const Program& prog_;
  int64_t batch_;
  Model& out_;
  diag::Diagnostics& diags_;
  Instance model_;
  std::vector<const syntax::LayerDecl*> active_;
  std::vector<std::pair<const Instance*, std::string>> binding_stack_;  // bindings being evaluated
  std::map<std::pair<const Instance*, std::string>, int> binding_blocks_;  // stacked bindings' blocks
  std::vector<int> open_blocks_;  // the trace blocks being recorded, innermost last
  int call_depth_ = 0;
  int instances_ = 0;
  int64_t steps_ = 0;
};

}  // namespace dtl::sema
