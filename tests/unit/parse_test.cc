// The syntax stage: every expression form of the grammar, recovery, limits.
#include <gtest/gtest.h>

#include "compiler/syntax/parse.h"
#include "compiler/syntax/print_ast.h"

namespace dtl::syntax {
namespace {

struct Parsed {
  diag::SourceManager src;
  std::unique_ptr<diag::Diagnostics> diags;
  Module module;
};

std::unique_ptr<Parsed> parse(const std::string& text) {
  auto p = std::make_unique<Parsed>();
  p->diags = std::make_unique<diag::Diagnostics>(p->src);
  int f = p->src.add("t.dtl", text);
  p->module = parseFile(p->src, f, *p->diags);
  return p;
}

ExprPtr expr(const std::string& text, std::string* errors = nullptr) {
  diag::SourceManager src;
  diag::Diagnostics diags(src);
  int f = src.add("e", text);
  ExprPtr e = parseExpression(src, f, diags);
  if (errors) *errors = diags.render();
  return e;
}

TEST(Parse, Quantities) {
  ExprPtr e = expr("25 MiB");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind, Expr::Kind::Quantity);
  EXPECT_EQ(e->number, 25);
  EXPECT_EQ(e->text, "MiB");
  e = expr("1.5e3 s");
  EXPECT_EQ(e->kind, Expr::Kind::Quantity);
  EXPECT_EQ(e->number, 1500);
  EXPECT_EQ(e->text, "s");
  // A unit word must end at a word boundary: `3 stepsize` is not a quantity.
  std::string errors;
  e = expr("3 stepsize", &errors);
  EXPECT_FALSE(e);
  EXPECT_NE(errors.find("e:1:3: error:"), std::string::npos) << errors;
}

TEST(Parse, PrecedenceAndForms) {
  EXPECT_EQ(exprText(*expr("x @ w + b * 2")), "x @ w + b * 2");
  ExprPtr e = expr("x @ w + b");
  ASSERT_EQ(e->kind, Expr::Kind::Binary);
  EXPECT_EQ(e->text, "+");
  EXPECT_EQ(e->kids[0]->text, "@");
  e = expr("-a * b");
  EXPECT_EQ(e->text, "*");
  EXPECT_EQ(e->kids[0]->kind, Expr::Kind::Unary);
  e = expr("a == b + 1");
  EXPECT_EQ(e->text, "==");
  e = expr("0..63");
  EXPECT_EQ(e->kind, Expr::Kind::Range);
  EXPECT_EQ(e->kids[1]->number, 63);
  e = expr("reshape(x, d -> (a, b))");
  ASSERT_EQ(e->kind, Expr::Kind::Call);
  EXPECT_EQ(e->kids[2]->kind, Expr::Kind::Arrow);
  EXPECT_EQ(e->kids[2]->kids[1]->kind, Expr::Kind::Tuple);
  e = expr("adamw(lr = 1e-3, betas = (0.9, 0.999))");
  ASSERT_EQ(e->arg_names.size(), 2u);
  EXPECT_EQ(e->arg_names[1], "betas");
  EXPECT_EQ(e->kids[2]->kids.size(), 2u);
  e = expr("1f1b(microbatches = 8)");
  EXPECT_EQ(e->calleeName(), "1f1b");
  e = expr("h @ wte.table");
  EXPECT_EQ(e->kids[1]->kind, Expr::Kind::Member);
  e = expr("\"a \\\"q\\\" \\\\ b\"");
  EXPECT_EQ(e->text, "a \"q\" \\ b");
  e = expr("(x,)");
  EXPECT_EQ(e->kind, Expr::Kind::Tuple);
  EXPECT_EQ(e->kids.size(), 1u);
  e = expr("mean(x, over = (a, b))");
  EXPECT_EQ(e->arg_names[1], "over");
}

TEST(Parse, AFileWithEveryDeclaration) {
  auto p = parse(R"(
import "other.dtl"
layer L(in: dim, out: dim, use_bias: bool = true) {
  dim h = in * 2
  param w : [in, out] init normal(std = 0.02)
  param b : bf16[out] init zeros if use_bias
  sub = Linear(in, out)
  forward(x) {
    let y = x @ w
    return y + b
  }
}
model M {
  dim d = 4
  input x : f32[batch, d]
  blocks = repeat(n) L(d, d)
  loss = mean(x)
  metric m = sum(x)
}
data {
  train { x = idx("a.gz") / 255; text("t.txt", seq = 8) }
  eval { x = csv("b.csv", columns = 0..3, header = false) }
  shuffle = true
}
train {
  batch = 8
  log every 20 steps
  checkpoint "runs/x" every 1 epoch keep 2
}
parallel {
  mesh dp = auto, tp = 2
  split batch over dp
  pipeline = 1f1b(microbatches = 8)
  bucket = 25 MiB
}
)");
  EXPECT_FALSE(p->diags->hasErrors()) << p->diags->render();
  const Module& m = p->module;
  ASSERT_EQ(m.imports.size(), 1u);
  ASSERT_EQ(m.layers.size(), 2u);
  const LayerDecl& l = m.layers[0];
  EXPECT_EQ(l.args.size(), 3u);
  ASSERT_EQ(l.params.size(), 2u);
  EXPECT_TRUE(l.params[1].cond);
  EXPECT_EQ(l.params[1].type.elem->name, "bf16");
  ASSERT_EQ(l.forwards.size(), 1u);
  EXPECT_EQ(l.forwards[0].lets.size(), 1u);
  EXPECT_TRUE(l.forwards[0].result);
  EXPECT_TRUE(m.layers[1].is_model);
  EXPECT_EQ(m.layers[1].bindings[0].value->kind, Expr::Kind::Repeat);
  EXPECT_TRUE(m.layers[1].bindings[2].is_metric);
  ASSERT_EQ(m.data.size(), 1u);
  EXPECT_EQ(m.data[0].splits[0].fields.size(), 2u);
  EXPECT_FALSE(m.data[0].splits[0].fields[1].name.has_value());
  ASSERT_EQ(m.train[0].every.size(), 2u);
  EXPECT_EQ(m.train[0].every[1].target->text, "runs/x");
  EXPECT_EQ(m.parallel[0].mesh.size(), 2u);
  EXPECT_EQ(m.parallel[0].splits[0].axis.name, "dp");
  // The AST printer is deterministic and locates every node.
  std::string ast = printAst(m);
  EXPECT_EQ(ast, printAst(parse(p->src.text(0))->module));
  EXPECT_NE(ast.find("param b : bf16[out]  @6:9"), std::string::npos) << ast;
}

TEST(Parse, RecoversAndReportsEveryError) {
  auto p = parse("model M {\n  x = (1 +\n  y = 2\n}\nlayer L( {\n}\n");
  EXPECT_GE(p->diags->errorCount(), 2) << p->diags->render();
}

TEST(Parse, StrayCharactersAreLocated) {
  auto p = parse("model M {\n  x = 1 $ 2\n}\n");
  ASSERT_TRUE(p->diags->hasErrors());
  EXPECT_EQ(p->diags->all()[0].message, "unexpected character `$`");
  EXPECT_EQ(p->diags->all()[0].loc.line, 2);
  EXPECT_EQ(p->diags->all()[0].loc.col, 9);
}

TEST(Parse, DeepNestingIsRejectedNotACrash) {
  std::string deep = "model M { x = " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }";
  auto p = parse(deep);
  ASSERT_TRUE(p->diags->hasErrors());
  EXPECT_NE(p->diags->all()[0].message.find("nesting deeper than 200"), std::string::npos);
  std::string minus = "model M { x = " + std::string(5000, '-') + "1 }";
  EXPECT_TRUE(parse(minus)->diags->hasErrors());
}

TEST(Parse, LongFlatSumsParse) {
  std::string sum = "model M { x = a";
  for (int i = 0; i < 500; ++i) sum += " + a";
  sum += " }";
  auto p = parse(sum);
  EXPECT_FALSE(p->diags->hasErrors()) << p->diags->render();
}

TEST(Parse, InvalidUtf8IsRejectedWithItsPosition) {
  auto p = parse("model M {\n  x = \xff\n}\n");
  ASSERT_TRUE(p->diags->hasErrors());
  EXPECT_EQ(p->diags->all()[0].message, "invalid UTF-8 byte in source");
  EXPECT_EQ(p->diags->all()[0].loc.line, 2);
  EXPECT_EQ(p->diags->all()[0].loc.col, 7);
}

}  // namespace
}  // namespace dtl::syntax
