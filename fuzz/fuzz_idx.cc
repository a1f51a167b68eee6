// libFuzzer target: MNIST IDX files (runtime/data/probe.cc probeIdx, then the
// loader's readIdx). The input is the file's bytes, plain or gzip (the reader
// decides from the magic); the first byte's low bit picks an f32 or an i32 input.
#include <cstddef>
#include <cstdint>

#include "fuzz/fuzz_dataset.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dtl;
  bool integer = size > 0 && (data[0] & 1);
  rt::data::FieldSpec f;
  f.source = "idx";
  f.path = fuzz::writeInput("input.idx", data, size);
  fuzz::loadAccepted(f, rt::data::probeIdx(f.path), integer);
  return 0;
}
