// The trace sema leaves for lowering (op_trace.h): each tensor operation the
// instantiator evaluates is appended, in evaluation order, to the block being
// recorded, and its Value names the step's slot. Recording never changes a
// Value's type; what a step lowers to is lowering's business.
#include <algorithm>

#include "compiler/sema/instantiator.h"

namespace dtl::sema {

using K = Value::Kind;

namespace {

TraceOperand operandOf(const Value& v) {
  TraceOperand o;
  o.tensor = v.kind == K::Tensor;
  if (o.tensor) {
    o.slot = v.slot;
    o.shape = v.shape;
    o.dtype = v.dtype;
  }
  o.number = v.kind == K::Dim ? static_cast<double>(v.dim.size) : v.number;
  if (v.kind == K::Dim) o.dims.push_back(v.dim.name);
  for (const Value& i : v.items)
    if (i.kind == K::Dim) o.dims.push_back(i.dim.name);
  return o;
}

TraceStep stepOf(TraceStep::Kind kind, const std::string& name, const Value& type, Loc loc) {
  TraceStep s;
  s.kind = kind;
  s.name = name;
  s.shape = type.shape;
  s.dtype = type.dtype;
  s.loc = loc;
  return s;
}

}  // namespace

int Instantiator::openBlock() {
  out_.ops.blocks.emplace_back();
  open_blocks_.push_back(static_cast<int>(out_.ops.blocks.size()) - 1);
  return open_blocks_.back();
}

void Instantiator::closeBlock() { open_blocks_.pop_back(); }

TraceStep& Instantiator::record(TraceStep step) {
  step.slot = out_.ops.slots++;
  std::vector<TraceStep>& steps = out_.ops.blocks[static_cast<size_t>(open_blocks_.back())].steps;
  steps.push_back(std::move(step));
  return steps.back();
}

Value Instantiator::recordInput(const std::string& name, Value v, Loc loc) {
  v.slot = record(stepOf(TraceStep::Kind::Input, name, v, loc)).slot;
  return v;
}

// The parameter as seen `depth` stack levels deep: lowering slices the full
// tensor at the current copy of each of its first `depth` stack dims.
Value Instantiator::recordParam(const Instance& inst, const std::string& name, size_t depth, Value v) {
  std::string path = inst.path.empty() ? name : inst.path + "." + name;
  TraceStep s = stepOf(TraceStep::Kind::Param, path, v, Loc{});
  s.stack.assign(inst.stack.begin(), inst.stack.begin() + static_cast<long>(std::min(depth, inst.stack.size())));
  v.slot = record(std::move(s)).slot;
  return v;
}

Value Instantiator::recordBinary(const std::string& op, const Value& a, const Value& b, Value out, Loc loc) {
  if (out.isError()) return out;
  TraceStep s = stepOf(TraceStep::Kind::Binary, op, out, loc);
  s.operands = {operandOf(a), operandOf(b)};
  out.slot = record(std::move(s)).slot;
  return out;
}

Value Instantiator::recordUnary(const std::string& fn, Value x, Loc loc) {
  TraceStep s = stepOf(TraceStep::Kind::Unary, fn, x, loc);
  s.operands = {operandOf(x)};
  x.slot = record(std::move(s)).slot;
  return x;
}

Value Instantiator::recordPrimitive(const std::string& fn, const std::vector<std::optional<Value>>& args, Value out,
                                    Loc loc) {
  if (out.isError()) return out;
  TraceStep s = stepOf(TraceStep::Kind::Primitive, fn, out, loc);
  for (const std::optional<Value>& a : args)
    s.operands.push_back(a ? std::optional<TraceOperand>(operandOf(*a)) : std::nullopt);
  out.slot = record(std::move(s)).slot;
  return out;
}

// A use of a stacked layer's binding (`v`, computed by `block`).
Value Instantiator::recordReplay(int block, Value v, Loc loc) {
  if (v.isError()) return v;
  TraceStep s = stepOf(TraceStep::Kind::Replay, "", v, loc);
  s.block = block;
  s.result = v.kind == K::Tensor ? v.slot : -1;
  int slot = record(std::move(s)).slot;
  if (v.kind == K::Tensor) v.slot = slot;
  return v;
}

// Starts recording a call of `inst`'s forward from a frame `outer` stack
// levels deep: the dims below `outer` are the copies lowering unrolls. Each
// tensor argument in `args` is given the slot its forward parameter reads.
TraceStep Instantiator::openCall(const Instance& inst, size_t outer, std::vector<Value>& args, Loc loc) {
  TraceStep s;
  s.kind = TraceStep::Kind::Call;
  s.loc = loc;
  s.stack.assign(inst.stack.begin() + static_cast<long>(std::min(outer, inst.stack.size())), inst.stack.end());
  for (Value& a : args) {
    s.operands.push_back(operandOf(a));
    if (a.kind == K::Tensor) a.slot = out_.ops.slots++;
    s.params.push_back(a.kind == K::Tensor ? a.slot : -1);
  }
  s.block = openBlock();
  return s;
}

Value Instantiator::closeCall(TraceStep step, Value out) {
  closeBlock();
  if (out.isError()) return out;
  step.shape = out.shape;
  step.dtype = out.dtype;
  step.result = out.kind == K::Tensor ? out.slot : -1;
  int slot = record(std::move(step)).slot;
  if (out.kind == K::Tensor) out.slot = slot;
  return out;
}

}  // namespace dtl::sema
