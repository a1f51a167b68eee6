#include "compiler/syntax/print_ast.h"

#include "compiler/syntax/parse.h"

namespace dtl::syntax {

namespace {

class Printer {
 public:
  std::string out;

  void line(int depth, const std::string& text, Loc loc) {
    out.append(static_cast<size_t>(depth) * 2, ' ');
    out += text;
    if (loc.valid()) out += "  @" + std::to_string(loc.line) + ":" + std::to_string(loc.col);
    out += "\n";
  }

  void expr(int depth, const Expr& e, const std::string& label = "") {
    std::string head = label.empty() ? "" : label + ": ";
    switch (e.kind) {
      case Expr::Kind::Number:
      case Expr::Kind::Quantity:
      case Expr::Kind::String:
      case Expr::Kind::Bool:
      case Expr::Kind::Name:
      case Expr::Kind::Error:
        line(depth, head + exprText(e), e.loc);
        return;
      case Expr::Kind::Member: line(depth, head + "member ." + e.text, e.loc); break;
      case Expr::Kind::Call: line(depth, head + "call", e.loc); break;
      case Expr::Kind::Unary: line(depth, head + "unary " + e.text, e.loc); break;
      case Expr::Kind::Binary: line(depth, head + "binary " + e.text, e.loc); break;
      case Expr::Kind::Range: line(depth, head + "range", e.loc); break;
      case Expr::Kind::Arrow: line(depth, head + "arrow", e.loc); break;
      case Expr::Kind::Tuple: line(depth, head + "tuple", e.loc); break;
      case Expr::Kind::Repeat: line(depth, head + "repeat", e.loc); break;
    }
    for (size_t i = 0; i < e.kids.size(); ++i) {
      std::string l;
      if (e.kind == Expr::Kind::Call && i > 0 && !e.arg_names[i - 1].empty()) l = e.arg_names[i - 1];
      expr(depth + 1, *e.kids[i], l);
    }
  }

  void type(const TensorType& t, std::string& s) {
    if (t.elem) s += t.elem->name;
    s += "[";
    for (size_t i = 0; i < t.dims.size(); ++i) s += (i ? ", " : "") + t.dims[i].name;
    s += "]";
  }

  void layer(const LayerDecl& l) {
    std::string head = (l.is_model ? "model " : "layer ") + l.name.name;
    line(0, head, l.name.loc);
    for (const LayerArg& a : l.args) {
      line(1, "arg " + a.name.name + " : " + a.type.name, a.name.loc);
      if (a.default_value) expr(2, *a.default_value, "default");
    }
    for (const DimDef& d : l.dims) {
      line(1, "dim " + d.name.name, d.name.loc);
      expr(2, *d.value);
    }
    for (const ParamDecl& p : l.params) {
      std::string s = "param " + p.name.name + " : ";
      type(p.type, s);
      line(1, s, p.name.loc);
      expr(2, *p.init, "init");
      if (p.cond) expr(2, *p.cond, "if");
    }
    for (const InputDecl& in : l.inputs) {
      std::string s = "input " + in.name.name + " : ";
      type(in.type, s);
      line(1, s, in.name.loc);
    }
    for (const Binding& b : l.bindings) {
      line(1, (b.is_metric ? "metric " : "bind ") + b.name.name, b.name.loc);
      expr(2, *b.value);
    }
    for (const Forward& f : l.forwards) {
      std::string s = "forward(";
      for (size_t i = 0; i < f.params.size(); ++i) s += (i ? ", " : "") + f.params[i].name;
      line(1, s + ")", f.loc);
      for (const Let& let : f.lets) {
        line(2, "let " + let.name.name, let.name.loc);
        expr(3, *let.value);
      }
      if (f.result) expr(2, *f.result, "return");
    }
  }
};

}  // namespace

std::string printAst(const Module& m) {
  Printer p;
  for (const Import& i : m.imports) p.line(0, "import \"" + i.path + "\"", i.loc);
  for (const LayerDecl& l : m.layers) p.layer(l);
  for (const DataDecl& d : m.data) {
    p.line(0, "data", d.loc);
    for (const DataSplit& s : d.splits) {
      p.line(1, "split " + s.name.name, s.name.loc);
      for (const DataField& f : s.fields) p.expr(2, *f.source, f.name ? f.name->name : "(fields)");
    }
    for (const Setting& s : d.settings) p.expr(1, *s.value, s.key.name);
  }
  for (const TrainDecl& t : m.train) {
    p.line(0, "train", t.loc);
    for (const Setting& s : t.settings) p.expr(1, *s.value, s.key.name);
    for (const EveryItem& e : t.every) {
      p.line(1, e.what.name + " every", e.what.loc);
      if (e.target) p.expr(2, *e.target, "target");
      p.expr(2, *e.every, "period");
      if (e.keep) p.expr(2, *e.keep, "keep");
    }
  }
  for (const ParallelDecl& par : m.parallel) {
    p.line(0, "parallel", par.loc);
    for (const MeshAxis& a : par.mesh) p.expr(1, *a.size, "mesh " + a.name.name);
    for (const SplitRule& s : par.splits) p.line(1, "split " + s.dim.name + " over " + s.axis.name, s.loc);
    for (const Setting& s : par.settings) p.expr(1, *s.value, s.key.name);
  }
  return p.out;
}

}  // namespace dtl::syntax
