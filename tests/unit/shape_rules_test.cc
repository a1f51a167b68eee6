// Typing rules of language.md §5, unit by unit: broadcasting by name,
// contraction, reductions, reshape, embed, attention, cross_entropy, cast.
#include <gtest/gtest.h>

#include "compiler/sema/shape_rules.h"

namespace dtl::sema {
namespace {

Value t(std::vector<Dim> dims, DType dt = DType::F32) { return Value::tensor(Shape{std::move(dims)}, dt); }
Value dim(const std::string& n, int64_t s) { return Value::ofDim(Dim{n, s}); }
const Dim B{"batch", 8}, H{"hidden", 16}, C{"classes", 10}, S{"seq", 5}, NH{"heads", 2}, HD{"hd", 4};

struct Rules : ::testing::Test {
  diag::SourceManager src;
  diag::Diagnostics diags{src};
  Loc at{src.add("t", "x\n"), 1, 1, 1};
  std::string firstError() { return diags.all().empty() ? "" : diags.all()[0].message; }
  Value prim(const std::string& fn, std::vector<std::optional<Value>> args) {
    std::vector<Loc> locs(args.size(), at);
    return primitiveRule(fn, args, locs, at, diags);
  }
};

TEST_F(Rules, BroadcastAlignsByNameAndKeepsTheLargerOrder) {
  EXPECT_EQ(binaryRule("+", t({B, H}), t({H}), at, diags).shape.names(), "[batch, hidden]");
  EXPECT_EQ(binaryRule("+", t({H}), t({B, H}), at, diags).shape.names(), "[batch, hidden]");
  EXPECT_EQ(binaryRule("*", t({B}), t({H}), at, diags).shape.names(), "[batch, hidden]");
  Value s = binaryRule("*", t({B, H}), Value::num(2, true), at, diags);
  EXPECT_EQ(s.dtype, DType::F32);
  EXPECT_EQ(binaryRule("==", t({B}, DType::I32), t({B}, DType::I32), at, diags).dtype, DType::Bool);
  EXPECT_FALSE(diags.hasErrors());
}

TEST_F(Rules, BroadcastRejectsOneNameWithTwoSizes) {
  EXPECT_TRUE(binaryRule("+", t({B, H}), t({Dim{"hidden", 32}}), at, diags).isError());
  EXPECT_EQ(firstError(), "`+` of [batch=8, hidden=16] and [hidden=32]: dim `hidden` is 16 on the left but 32 on the right");
}

TEST_F(Rules, ArithmeticRejectsMixedTypesAndBools) {
  EXPECT_TRUE(binaryRule("+", t({B}), t({B}, DType::I32), at, diags).isError());
  EXPECT_EQ(firstError(), "`+` mixes element types f32 and i32");
  EXPECT_TRUE(binaryRule("+", t({B}, DType::Bool), t({B}, DType::Bool), at, diags).isError());
}

TEST_F(Rules, ContractionSumsSharedNames) {
  Value r = contractRule(t({B, S, H}), t({H, NH, HD}), at, diags);
  EXPECT_EQ(r.shape.names(), "[batch, seq, heads, hd]");
  r = contractRule(t({B, S, NH, HD}), t({NH, HD, H}), at, diags);
  EXPECT_EQ(r.shape.names(), "[batch, seq, hidden]");
  EXPECT_FALSE(diags.hasErrors());
  EXPECT_TRUE(contractRule(t({B, H}), t({C}), at, diags).isError());
  EXPECT_EQ(firstError(), "`@` needs a dim shared by both operands; left is [batch, hidden], right is [classes]");
}

TEST_F(Rules, Reductions) {
  EXPECT_EQ(prim("sum", {t({B, H}), dim("hidden", 16)}).shape.names(), "[batch]");
  EXPECT_TRUE(prim("mean", {t({B, H}), std::nullopt}).shape.scalar());
  Value tup;
  tup.kind = Value::Kind::Tuple;
  tup.items = {dim("batch", 8), dim("hidden", 16)};
  EXPECT_TRUE(prim("max", {t({B, H}), tup}).shape.scalar());
  EXPECT_TRUE(prim("sum", {t({B}), dim("hidden", 16)}).isError());
  EXPECT_EQ(firstError(), "`sum` over `hidden`, which f32[batch=8] does not have");
}

TEST_F(Rules, SoftmaxNormalizeKeepShape) {
  EXPECT_EQ(prim("softmax", {t({B, C}), dim("classes", 10)}).shape.names(), "[batch, classes]");
  EXPECT_EQ(prim("normalize", {t({B, H}), dim("hidden", 16), Value::num(1e-5, false)}).shape.names(),
            "[batch, hidden]");
  EXPECT_TRUE(prim("gelu", {t({B}, DType::I32)}).isError());
}

TEST_F(Rules, ReshapeSplitsAndMerges) {
  Value split;
  split.kind = Value::Kind::Tuple;
  split.text = "->";
  Value ab;
  ab.kind = Value::Kind::Tuple;
  ab.items = {dim("heads", 2), dim("hd", 8)};
  split.items = {dim("hidden", 16), ab};
  EXPECT_EQ(prim("reshape", {t({B, H}), split}).shape.str(), "[batch=8, heads=2, hd=8]");
  Value merge = split;
  merge.items = {ab, dim("hidden", 16)};
  EXPECT_EQ(prim("reshape", {t({B, Dim{"heads", 2}, Dim{"hd", 8}}), merge}).shape.str(), "[batch=8, hidden=16]");
  Value bad = split;
  bad.items = {dim("hidden", 16), dim("classes", 10)};
  EXPECT_TRUE(prim("reshape", {t({B, H}), bad}).isError());
  EXPECT_EQ(firstError(), "`reshape` from 16 to 10 elements");
}

TEST_F(Rules, EmbedAttentionCrossEntropyArgmaxCast) {
  Dim V{"vocab", 50};
  EXPECT_EQ(prim("embed", {t({V, H}), t({B, S}, DType::I32)}).shape.names(), "[batch, seq, hidden]");
  Value q = t({B, S, NH, HD});
  EXPECT_EQ(prim("attention", {q, q, q, Value::boolean(true)}).shape.names(), "[batch, seq, heads, hd]");
  EXPECT_TRUE(prim("cross_entropy", {t({B, C}), t({B}, DType::I32), dim("classes", 10)}).shape.scalar());
  EXPECT_EQ(prim("argmax", {t({B, C}), dim("classes", 10)}).dtype, DType::I32);
  Value f16;
  f16.kind = Value::Kind::DType;
  f16.dtype_value = DType::BF16;
  EXPECT_EQ(prim("cast", {t({B}), f16}).dtype, DType::BF16);
  EXPECT_FALSE(diags.hasErrors()) << diags.render();
  EXPECT_TRUE(prim("cross_entropy", {t({B, C}), t({B}), dim("classes", 10)}).isError());
  EXPECT_EQ(firstError(), "`cross_entropy` needs integer class ids as labels, got f32");
  EXPECT_TRUE(prim("embed", {t({V, H}), t({B}, DType::F32)}).isError());
  EXPECT_TRUE(prim("attention", {q, t({B, S, NH}), t({B, S, NH}), std::nullopt}).isError());
}

TEST_F(Rules, ZeroAndOneSizedDimsAreOrdinary) {
  Dim one{"one", 1};
  EXPECT_EQ(contractRule(t({B, one}), t({one, C}), at, diags).shape.names(), "[batch, classes]");
  EXPECT_FALSE(diags.hasErrors());
}

}  // namespace
}  // namespace dtl::sema
