// The syntax tree of one .dtl file: what was written, with locations, and
// nothing inferred. Produced by parse.cc (the only code that sees ANTLR),
// printed by print_ast.cc, read by sema.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compiler/diag/source.h"

namespace dtl::syntax {

using diag::Loc;

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    Number,    // number (is_int when written without '.' or exponent)
    Quantity,  // number + text (the unit): 25 MiB, 30 s, 20 steps
    String,    // text = the unescaped value
    Bool,      // number = 0 or 1
    Name,      // text = identifier
    Member,    // kids[0] . text
    Call,      // kids[0] = callee, kids[1..] = args, arg_names parallel to args
    Unary,     // text = op, kids[0]
    Binary,    // text = op (@ * / + - == != < <= > >= && ||), kids[0], kids[1]
    Range,     // kids[0] .. kids[1]
    Arrow,     // kids[0] -> kids[1]  (reshape)
    Tuple,     // kids
    Repeat,    // repeat(kids[0]) kids[1]
    Error,     // a syntax error was reported here
  };
  Kind kind = Kind::Error;
  Loc loc;
  std::string text;
  double number = 0;
  bool is_int = false;
  std::vector<ExprPtr> kids;
  std::vector<std::string> arg_names;  // Call only; "" = positional
  std::vector<Loc> arg_name_locs;      // Call only

  ExprPtr clone() const;
  // The callee name of a Call whose callee is a plain Name, else "".
  const std::string& calleeName() const;
};

struct Ident {
  std::string name;
  Loc loc;
};

struct DimDef {
  Ident name;
  ExprPtr value;
};

struct TensorType {
  std::optional<Ident> elem;  // f32, bf16, …; absent = default
  std::vector<Ident> dims;
  Loc loc;
};

struct ParamDecl {
  Ident name;
  TensorType type;
  ExprPtr init;
  ExprPtr cond;  // `if COND`, may be null
};

struct InputDecl {
  Ident name;
  TensorType type;
};

// `NAME = EXPR` in a body: a binding, a sub-layer (`Layer(args)`) or a stack
// (`repeat(n) Layer(args)`); sema decides which. `metric NAME = EXPR` too.
struct Binding {
  Ident name;
  ExprPtr value;
  bool is_metric = false;
};

struct Let {
  Ident name;
  ExprPtr value;
};

struct Forward {
  Loc loc;
  std::vector<Ident> params;
  std::vector<Let> lets;
  ExprPtr result;  // `= EXPR` or `return EXPR`; null if the block had no return
  Loc body_end;    // closing brace, for "no return" errors
};

struct LayerArg {
  Ident name;
  Ident type;       // dim, int, float, bool, string
  ExprPtr default_value;
};

// A layer or the model; both have the same body grammar.
struct LayerDecl {
  Ident name;
  bool is_model = false;
  std::vector<LayerArg> args;
  std::vector<DimDef> dims;
  std::vector<ParamDecl> params;
  std::vector<InputDecl> inputs;
  std::vector<Binding> bindings;  // source order, metrics included
  std::vector<Forward> forwards;  // more than one is an error
};

struct Setting {
  Ident key;
  ExprPtr value;
};

struct DataField {
  std::optional<Ident> name;  // absent: a source yielding several fields
  ExprPtr source;
};

struct DataSplit {
  Ident name;  // train / eval
  std::vector<DataField> fields;
};

struct DataDecl {
  Loc loc;
  std::vector<DataSplit> splits;
  std::vector<Setting> settings;
};

// `log every 20 steps`, `eval every 1 epoch`,
// `checkpoint "dir" every 1 epoch keep 2`.
struct EveryItem {
  Ident what;
  ExprPtr target;  // may be null
  ExprPtr every;
  ExprPtr keep;    // may be null
};

struct TrainDecl {
  Loc loc;
  std::vector<Setting> settings;
  std::vector<EveryItem> every;
};

struct MeshAxis {
  Ident name;
  ExprPtr size;  // a number, or the name `auto`
};

struct SplitRule {
  Loc loc;
  Ident dim;
  Ident axis;
};

struct ParallelDecl {
  Loc loc;
  std::vector<MeshAxis> mesh;
  Loc mesh_loc;
  bool has_mesh = false;
  std::vector<SplitRule> splits;
  std::vector<Setting> settings;
};

struct Import {
  Loc loc;
  std::string path;  // as written
};

struct Module {
  int file = -1;
  std::vector<Import> imports;
  std::vector<LayerDecl> layers;  // models included (is_model)
  std::vector<DataDecl> data;
  std::vector<TrainDecl> train;
  std::vector<ParallelDecl> parallel;
};

}  // namespace dtl::syntax
