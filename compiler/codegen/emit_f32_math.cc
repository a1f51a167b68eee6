// core/f32_math.h in IR. Integer steps wrap (no nsw): a NaN's bits make a
// meaningless but defined n, and the NaN itself carries through p.
#include "compiler/codegen/emit_f32_math.h"

#include "core/f32_math.h"
#include "llvm/IR/Intrinsics.h"
#include "llvm/IR/Module.h"

namespace dtl::codegen {

namespace {

using llvm::Value;

Value* flt(llvm::IRBuilder<>& b, float v) { return llvm::ConstantFP::get(b.getFloatTy(), v); }

Value* fma(llvm::IRBuilder<>& b, Value* x, Value* y, Value* z) {
  return b.CreateIntrinsic(llvm::Intrinsic::fma, {x->getType()}, {x, y, z});
}

template <size_t N>
Value* horner(llvm::IRBuilder<>& b, const float (&c)[N], Value* x) {
  Value* p = flt(b, c[0]);
  for (size_t i = 1; i < N; ++i) p = fma(b, p, x, flt(b, c[i]));
  return p;
}

// 2^(n) as a normal float from an i32 exponent in [−126, 127].
Value* powerOfTwo(llvm::IRBuilder<>& b, Value* n) {
  return b.CreateBitCast(b.CreateShl(b.CreateAdd(n, b.getInt32(127)), 23), b.getFloatTy());
}

}  // namespace

Value* emitExpF32(llvm::IRBuilder<>& b, Value* x) {
  using namespace f32math;
  Value* low = b.CreateFCmpOLT(x, flt(b, kExpLowest));
  Value* high = b.CreateFCmpOGT(x, flt(b, kExpHighest));
  Value* xc = b.CreateSelect(low, flt(b, kExpLowest), b.CreateSelect(high, flt(b, kExpHighest), x));
  Value* k = fma(b, xc, flt(b, kLog2e), flt(b, kRoundingShift));
  Value* shift_bits = b.CreateBitCast(flt(b, kRoundingShift), b.getInt32Ty());
  Value* n = b.CreateSub(b.CreateBitCast(k, b.getInt32Ty()), shift_bits);
  Value* kf = b.CreateFSub(k, flt(b, kRoundingShift));
  Value* r = fma(b, kf, flt(b, -kLn2Lo), fma(b, kf, flt(b, -kLn2Hi), xc));
  Value* p = horner(b, kExpPoly, r);
  Value* n1 = b.CreateAShr(n, 1);
  Value* n2 = b.CreateSub(n, n1);
  return b.CreateFMul(b.CreateFMul(p, powerOfTwo(b, n1)), powerOfTwo(b, n2));
}

Value* emitErfF32(llvm::IRBuilder<>& b, Value* x) {
  using namespace f32math;
  Value* t = b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
  Value* small = fma(b, t, horner(b, kErfSmall, b.CreateFMul(t, t)), t);
  Value* capped = b.CreateSelect(b.CreateFCmpOGT(t, flt(b, kErfCap)), flt(b, kErfCap), t);
  Value* large = b.CreateFSub(flt(b, 1.0f), horner(b, kErfLarge, b.CreateFSub(capped, flt(b, kErfMid))));
  Value* y = b.CreateSelect(b.CreateFCmpOLT(t, flt(b, kErfSplit)), small, large);
  return b.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, y, x);
}

}  // namespace dtl::codegen
