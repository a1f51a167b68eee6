// What sema hands to lowering: every tensor operation of the model in the
// order sema evaluated it, resolved (operands, named shape, element type,
// source location), so lowering (compiler/ir/lower_model.cc) emits nodes
// without evaluating the spec again. Sema checks a `repeat` stack once; so a
// layer call's forward is a block of its own, which lowering replays once per
// copy, and a binding of a stacked layer is a block replayed at each use.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "compiler/diag/source.h"
#include "core/dtype.h"
#include "core/shape.h"

namespace dtl::sema {

// An operand as sema resolved it: a tensor (the slot of the step that
// computes it) or a compile-time constant.
struct TraceOperand {
  bool tensor = false;
  int slot = -1;                  // tensor: the value's slot
  Shape shape;                    // tensor
  DType dtype = DType::F32;       // tensor
  double number = 0;              // a number, a bool (0 or 1) or a dim's size
  std::vector<std::string> dims;  // a dim, or a tuple's dims: their names
};

struct TraceStep {
  enum class Kind {
    Input,      // name: a model input
    Param,      // name: the path; `stack`: the stack dims it is read under (one slice each)
    Binary,     // name: the operator (+ - * / == != < <= > >= @); operands a, b
    Unary,      // name: the function (neg); operand x
    Primitive,  // name: the primitive; operands in signature order, nullopt where omitted
    Call,       // a layer's forward: `block`, run once per copy of the dims in `stack`
    Replay,     // a stacked layer's binding: `block`, run again at this use
  };
  Kind kind = Kind::Input;
  int slot = -1;  // the value this step defines
  Shape shape;
  DType dtype = DType::F32;
  diag::Loc loc;
  std::string name;
  std::vector<Dim> stack;
  std::vector<std::optional<TraceOperand>> operands;  // Call: the forward's arguments
  std::vector<int> params;  // Call: the slot each forward parameter reads (-1: not a tensor)
  int block = -1;           // Call, Replay
  int result = -1;          // Call, Replay: the block's result slot (-1: not a tensor)
};

struct TraceBlock {
  std::vector<TraceStep> steps;
};

struct OpTrace {
  std::vector<TraceBlock> blocks;  // [0]: the model's inputs and bindings
  int slots = 0;                   // slots are numbered 0 … slots-1
  int loss = -1;                   // the slot of `loss`
  std::vector<std::pair<std::string, int>> metrics;  // scalar tensor metrics: name, slot
};

}  // namespace dtl::sema
