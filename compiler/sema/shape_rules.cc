// Typing rules. Numbers act as weak scalars: they take the other operand's
// element type. Names align operands; a name with two sizes is an error
// naming both.
#include "compiler/sema/shape_rules.h"

#include <algorithm>
#include <set>

namespace dtl::sema {

namespace {

using K = Value::Kind;

bool asTensor(const Value& v, Value& out, bool& weak) {
  weak = false;
  if (v.kind == K::Tensor) {
    out = v;
    return true;
  }
  if (v.kind == K::Number || v.kind == K::Dim) {
    out = Value::tensor(Shape{}, DType::F32);
    weak = true;
    return true;
  }
  if (v.kind == K::Bool) {
    out = Value::tensor(Shape{}, DType::Bool);
    weak = true;
    return true;
  }
  return false;
}

std::string dimsOf(const Value& v) {
  return std::string(dtypeName(v.dtype)) + v.shape.str();
}

// Aligns two shapes by name; false (reported) when a name has two sizes.
bool alignShapes(const Shape& a, const Shape& b, Shape& out, Loc loc, const std::string& what,
                 diag::Diagnostics& diags) {
  for (const Dim& d : a.dims) {
    int j = b.find(d.name);
    if (j >= 0 && b.dims[j].size != d.size) {
      diags.error(loc,
                  what + " of " + a.str() + " and " + b.str() + ": dim `" + d.name + "` is " +
                      std::to_string(d.size) + " on the left but " + std::to_string(b.dims[j].size) +
                      " on the right",
                  "operands align by dim name, so a name must have one size; rename one of the two `" +
                      d.name + "` dims or make their sizes agree");
      return false;
    }
  }
  auto subset = [](const Shape& x, const Shape& y) {
    return std::all_of(x.dims.begin(), x.dims.end(), [&](const Dim& d) { return y.has(d.name); });
  };
  if (subset(b, a)) {
    out = a;
  } else if (subset(a, b)) {
    out = b;
  } else {
    out = a;
    for (const Dim& d : b.dims)
      if (!a.has(d.name)) out.dims.push_back(d);
  }
  return true;
}

bool isCompare(const std::string& op) {
  return op == "==" || op == "!=" || op == "<" || op == "<=" || op == ">" || op == ">=";
}

const Value* arg(const std::vector<std::optional<Value>>& args, size_t i) {
  return i < args.size() && args[i] ? &*args[i] : nullptr;
}

}  // namespace

Value binaryRule(const std::string& op, const Value& a, const Value& b, Loc loc,
                 diag::Diagnostics& diags) {
  if (a.isError() || b.isError()) return Value::error();
  Value ta, tb;
  bool wa, wb;
  if (!asTensor(a, ta, wa) || !asTensor(b, tb, wb)) {
    const Value& bad = asTensor(a, ta, wa) ? b : a;
    diags.error(loc, "`" + op + "` cannot take " + describe(bad),
                "arithmetic works on tensors and numbers");
    return Value::error();
  }
  DType t;
  if (wa && !wb) {
    t = tb.dtype;
  } else if (wb && !wa) {
    t = ta.dtype;
  } else if (ta.dtype != tb.dtype) {
    diags.error(loc, std::string("`") + op + "` mixes element types " + dtypeName(ta.dtype) + " and " +
                         dtypeName(tb.dtype),
                std::string("convert one side, e.g. cast(x, ") + dtypeName(ta.dtype) + ")");
    return Value::error();
  } else {
    t = ta.dtype;
  }
  if (!isCompare(op) && (t == DType::Bool || (wa && a.kind == K::Bool) || (wb && b.kind == K::Bool))) {
    diags.error(loc, "`" + op + "` on bool values", "convert first: cast(x, f32)");
    return Value::error();
  }
  Shape s;
  if (!alignShapes(ta.shape, tb.shape, s, loc, "`" + op + "`", diags)) return Value::error();
  return Value::tensor(std::move(s), isCompare(op) ? DType::Bool : t);
}

Value contractRule(const Value& a, const Value& b, Loc loc, diag::Diagnostics& diags) {
  if (a.isError() || b.isError()) return Value::error();
  if (a.kind != K::Tensor || b.kind != K::Tensor) {
    diags.error(loc, "`@` needs two tensors, got " + describe(a.kind != K::Tensor ? a : b),
                "scale by a number with `*`");
    return Value::error();
  }
  if (a.dtype != b.dtype || !isFloat(a.dtype)) {
    diags.error(loc, std::string("`@` needs two floating-point tensors of one type, got ") +
                         dtypeName(a.dtype) + " and " + dtypeName(b.dtype),
                "convert with cast(x, f32)");
    return Value::error();
  }
  std::vector<std::string> shared;
  for (const Dim& d : a.shape.dims) {
    int j = b.shape.find(d.name);
    if (j < 0) continue;
    if (b.shape.dims[j].size != d.size) {
      diags.error(loc,
                  "`@` of " + a.shape.str() + " and " + b.shape.str() + ": the contracted dim `" + d.name +
                      "` is " + std::to_string(d.size) + " on the left but " +
                      std::to_string(b.shape.dims[j].size) + " on the right",
                  "operands align by dim name, so a name must have one size; rename one of the two `" +
                      d.name + "` dims or make their sizes agree");
      return Value::error();
    }
    shared.push_back(d.name);
  }
  if (shared.empty()) {
    diags.error(loc, "`@` needs a dim shared by both operands; left is " + a.shape.names() +
                         ", right is " + b.shape.names(),
                "`@` sums over the dims the operands share by name; check the layer's argument order");
    return Value::error();
  }
  Shape out;
  for (const Dim& d : a.shape.dims)
    if (!b.shape.has(d.name)) out.dims.push_back(d);
  for (const Dim& d : b.shape.dims)
    if (!a.shape.has(d.name)) out.dims.push_back(d);
  return Value::tensor(std::move(out), a.dtype);
}

namespace {

bool needTensor(const Value* v, Loc loc, const std::string& fn, const std::string& param,
                diag::Diagnostics& diags, Value& out) {
  if (!v || v->isError()) return false;
  bool weak;
  if (v->kind == K::Tensor) {
    out = *v;
    return true;
  }
  if (v->kind == K::Number && asTensor(*v, out, weak)) return true;
  diags.error(loc, "`" + fn + "` expects a tensor for `" + param + "`, got " + describe(*v));
  return false;
}

bool needFloat(const Value& t, Loc loc, const std::string& fn, diag::Diagnostics& diags) {
  if (isFloat(t.dtype)) return true;
  diags.error(loc, "`" + fn + "` needs floating-point values, got " + dtypeName(t.dtype),
              "convert with cast(x, f32)");
  return false;
}

// `over = d` or `over = (a, b)`: dims that must be in `x`.
bool overDims(const Value* v, const Value& x, Loc loc, const std::string& fn, bool allow_tuple,
              std::vector<std::string>& out, diag::Diagnostics& diags) {
  std::vector<const Value*> items;
  if (v->kind == K::Dim) {
    items.push_back(v);
  } else if (v->kind == K::Tuple && allow_tuple) {
    for (const Value& i : v->items) items.push_back(&i);
  } else {
    if (!v->isError())
      diags.error(loc, "`over` of `" + fn + "` expects " + (allow_tuple ? "a dim or a tuple of dims" : "a dim") +
                           ", got " + describe(*v));
    return false;
  }
  for (const Value* i : items) {
    if (i->kind != K::Dim) {
      diags.error(loc, "`over` of `" + fn + "` expects dims, got " + describe(*i));
      return false;
    }
    if (!x.shape.has(i->dim.name)) {
      diags.error(loc, "`" + fn + "` over `" + i->dim.name + "`, which " + dimsOf(x) + " does not have",
                  "its dims are " + x.shape.names());
      return false;
    }
    if (std::find(out.begin(), out.end(), i->dim.name) != out.end()) {
      diags.error(loc, "`" + i->dim.name + "` is listed twice in `over`");
      return false;
    }
    out.push_back(i->dim.name);
  }
  return true;
}

Shape without(const Shape& s, const std::vector<std::string>& names) {
  Shape out;
  for (const Dim& d : s.dims)
    if (std::find(names.begin(), names.end(), d.name) == names.end()) out.dims.push_back(d);
  return out;
}

Value reshapeRule(const Value& x, const Value& spec, Loc loc, diag::Diagnostics& diags) {
  if (spec.kind != K::Tuple || spec.items.size() != 2 || spec.text != "->") {
    diags.error(loc, "`reshape` expects `d -> (a, b)`, `(a, b) -> d` or `a -> b`, got " + describe(spec));
    return Value::error();
  }
  auto dimsIn = [&](const Value& side, std::vector<Dim>& out) {
    if (side.kind == K::Dim) {
      out.push_back(side.dim);
      return true;
    }
    if (side.kind == K::Tuple) {
      for (const Value& i : side.items) {
        if (i.kind != K::Dim) return false;
        out.push_back(i.dim);
      }
      return !out.empty();
    }
    return false;
  };
  std::vector<Dim> from, to;
  if (!dimsIn(spec.items[0], from) || !dimsIn(spec.items[1], to)) {
    diags.error(loc, "`reshape` sides must be dims or tuples of dims");
    return Value::error();
  }
  int first = x.shape.find(from[0].name);
  for (size_t i = 0; i < from.size(); ++i) {
    int j = x.shape.find(from[i].name);
    if (j < 0) {
      diags.error(loc, "`reshape` of `" + from[i].name + "`, which " + dimsOf(x) + " does not have");
      return Value::error();
    }
    if (j != first + static_cast<int>(i)) {
      diags.error(loc, "`reshape` merges adjacent dims in storage order", "in " + x.shape.names() + " they are not adjacent");
      return Value::error();
    }
  }
  int64_t pf = 1, pt = 1;
  for (const Dim& d : from)
    if (!checkedMul(pf, d.size, pf)) pf = -1;
  for (const Dim& d : to)
    if (!checkedMul(pt, d.size, pt)) pt = -2;
  if (pf != pt) {
    diags.error(loc, "`reshape` from " + std::to_string(pf) + " to " + std::to_string(pt) + " elements",
                "the sizes on both sides of `->` must multiply to the same number");
    return Value::error();
  }
  Shape out;
  for (int i = 0; i < static_cast<int>(x.shape.dims.size()); ++i) {
    if (i == first)
      for (const Dim& d : to) out.dims.push_back(d);
    if (i >= first && i < first + static_cast<int>(from.size())) continue;
    out.dims.push_back(x.shape.dims[i]);
  }
  for (size_t i = 0; i < out.dims.size(); ++i)
    for (size_t j = i + 1; j < out.dims.size(); ++j)
      if (out.dims[i].name == out.dims[j].name) {
        diags.error(loc, "`reshape` would give two dims named `" + out.dims[i].name + "`");
        return Value::error();
      }
  return Value::tensor(std::move(out), x.dtype);
}

}  // namespace

Value primitiveRule(const std::string& fn, const std::vector<std::optional<Value>>& args,
                    const std::vector<Loc>& locs, Loc call, diag::Diagnostics& diags) {
  for (const auto& a : args)
    if (a && a->isError()) return Value::error();
  Value x;
  static const std::set<std::string> kUnaryFloat = {"relu", "gelu", "gelu_tanh", "silu", "tanh",
                                                    "sigmoid", "exp", "log", "sqrt", "rsqrt"};
  if (kUnaryFloat.count(fn) || fn == "neg" || fn == "abs") {
    if (!needTensor(arg(args, 0), locs[0], fn, "x", diags, x)) return Value::error();
    if (kUnaryFloat.count(fn) && !needFloat(x, locs[0], fn, diags)) return Value::error();
    if (x.dtype == DType::Bool) {
      diags.error(locs[0], "`" + fn + "` on bool values", "convert first: cast(x, f32)");
      return Value::error();
    }
    return x;
  }
  if (fn == "sum" || fn == "mean" || fn == "max") {
    if (!needTensor(arg(args, 0), locs[0], fn, "x", diags, x)) return Value::error();
    if (x.dtype == DType::Bool) {
      diags.error(locs[0], "`" + fn + "` on bool values", "convert first: cast(x, f32)");
      return Value::error();
    }
    if (fn == "mean" && !needFloat(x, locs[0], fn, diags)) return Value::error();
    if (!arg(args, 1)) return Value::tensor(Shape{}, x.dtype);
    std::vector<std::string> over;
    if (!overDims(arg(args, 1), x, locs[1], fn, true, over, diags)) return Value::error();
    return Value::tensor(without(x.shape, over), x.dtype);
  }
  if (fn == "softmax" || fn == "log_softmax" || fn == "normalize" || fn == "rms_normalize") {
    if (!needTensor(arg(args, 0), locs[0], fn, "x", diags, x)) return Value::error();
    if (!needFloat(x, locs[0], fn, diags)) return Value::error();
    std::vector<std::string> over;
    bool tuple_ok = fn == "normalize" || fn == "rms_normalize";
    if (!overDims(arg(args, 1), x, locs[1], fn, tuple_ok, over, diags)) return Value::error();
    if (const Value* eps = arg(args, 2)) {
      if (eps->kind != K::Number || eps->number <= 0) {
        diags.error(locs[2], "`eps` of `" + fn + "` must be a positive number");
        return Value::error();
      }
    }
    return x;
  }
  if (fn == "embed") {
    Value table, ids;
    if (!needTensor(arg(args, 0), locs[0], fn, "table", diags, table) ||
        !needTensor(arg(args, 1), locs[1], fn, "ids", diags, ids))
      return Value::error();
    if (table.shape.rank() < 2 || !isFloat(table.dtype)) {
      diags.error(locs[0], "`embed` needs a floating-point table with at least two dims, got " + dimsOf(table),
                  "a table is [vocab, d]: rows are looked up by id");
      return Value::error();
    }
    if (!isInteger(ids.dtype)) {
      diags.error(locs[1], std::string("`embed` needs integer ids, got ") + dtypeName(ids.dtype),
                  "declare the input as i32[…]");
      return Value::error();
    }
    Shape out = ids.shape;
    for (size_t i = 1; i < table.shape.dims.size(); ++i) {
      if (out.has(table.shape.dims[i].name)) {
        diags.error(call, "`embed` result would have `" + table.shape.dims[i].name + "` twice");
        return Value::error();
      }
      out.dims.push_back(table.shape.dims[i]);
    }
    return Value::tensor(std::move(out), table.dtype);
  }
  if (fn == "attention") {
    Value q, k, v;
    if (!needTensor(arg(args, 0), locs[0], fn, "q", diags, q) ||
        !needTensor(arg(args, 1), locs[1], fn, "k", diags, k) ||
        !needTensor(arg(args, 2), locs[2], fn, "v", diags, v))
      return Value::error();
    if (q.shape.rank() < 3) {
      diags.error(locs[0], "`attention` needs q as [..., seq, heads, head_dim], got " + q.shape.names());
      return Value::error();
    }
    if (!needFloat(q, locs[0], fn, diags)) return Value::error();
    if (k.shape != v.shape || k.dtype != v.dtype) {
      diags.error(locs[2], "`attention` needs k and v of one shape; k is " + k.shape.str() + ", v is " + v.shape.str());
      return Value::error();
    }
    Shape qs = q.shape, ks = k.shape;
    size_t r = qs.rank();
    bool ok = ks.rank() == r && k.dtype == q.dtype;
    for (size_t i = 0; ok && i < r; ++i)
      if (i != r - 3 && !(qs.dims[i] == ks.dims[i])) ok = false;
    if (!ok) {
      diags.error(locs[1], "`attention` needs q and k to agree in all dims but seq; q is " + qs.str() +
                               ", k is " + ks.str(),
                  "q, k, v are [..., seq, heads, head_dim]");
      return Value::error();
    }
    if (const Value* c = arg(args, 3); c && c->kind != K::Bool) {
      diags.error(locs[3], "`causal` must be true or false, got " + describe(*c));
      return Value::error();
    }
    return q;
  }
  if (fn == "dropout") {
    if (!needTensor(arg(args, 0), locs[0], fn, "x", diags, x)) return Value::error();
    const Value* p = arg(args, 1);
    if (p->kind != K::Number || p->number < 0 || p->number >= 1) {
      diags.error(locs[1], "`dropout` probability must be a number in [0, 1)");
      return Value::error();
    }
    return x;
  }
  if (fn == "cross_entropy") {
    Value logits, labels;
    if (!needTensor(arg(args, 0), locs[0], fn, "logits", diags, logits) ||
        !needTensor(arg(args, 1), locs[1], fn, "labels", diags, labels))
      return Value::error();
    if (!needFloat(logits, locs[0], fn, diags)) return Value::error();
    std::vector<std::string> over;
    if (!overDims(arg(args, 2), logits, locs[2], fn, false, over, diags)) return Value::error();
    if (!isInteger(labels.dtype)) {
      diags.error(locs[1], std::string("`cross_entropy` needs integer class ids as labels, got ") +
                               dtypeName(labels.dtype),
                  "declare the labels input as i32[…]");
      return Value::error();
    }
    Shape expect = without(logits.shape, over);
    bool same = expect.rank() == labels.shape.rank();
    for (const Dim& d : expect.dims) {
      int j = labels.shape.find(d.name);
      if (j < 0 || labels.shape.dims[j].size != d.size) same = false;
    }
    if (!same) {
      diags.error(locs[1], "`cross_entropy` labels are " + labels.shape.str() + " but logits without `" +
                               over[0] + "` are " + expect.str(),
                  "labels have every dim of the logits except the classes");
      return Value::error();
    }
    return Value::tensor(Shape{}, DType::F32);
  }
  if (fn == "argmax") {
    if (!needTensor(arg(args, 0), locs[0], fn, "x", diags, x)) return Value::error();
    std::vector<std::string> over;
    if (!overDims(arg(args, 1), x, locs[1], fn, false, over, diags)) return Value::error();
    return Value::tensor(without(x.shape, over), DType::I32);
  }
  if (fn == "reshape") {
    if (!needTensor(arg(args, 0), locs[0], fn, "x", diags, x)) return Value::error();
    return reshapeRule(x, *arg(args, 1), locs[1], diags);
  }
  if (fn == "arange") {
    const Value* d = arg(args, 0);
    if (d->kind != K::Dim) {
      diags.error(locs[0], "`arange` expects a dim, got " + describe(*d));
      return Value::error();
    }
    return Value::tensor(Shape{{d->dim}}, DType::I32);
  }
  if (fn == "cast") {
    if (!needTensor(arg(args, 0), locs[0], fn, "x", diags, x)) return Value::error();
    const Value* t = arg(args, 1);
    if (t->kind != K::DType) {
      diags.error(locs[1], "`cast` expects an element type (f32, bf16, f16, i32, i64, u8, u16, bool), got " +
                               describe(*t));
      return Value::error();
    }
    return Value::tensor(x.shape, t->dtype_value);
  }
  diags.error(call, "`" + fn + "` has no typing rule");  // unreachable for known builtins
  return Value::error();
}

}  // namespace dtl::sema
