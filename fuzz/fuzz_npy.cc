// libFuzzer target: NumPy .npy files (runtime/data/probe.cc probeNpy and its
// Python-literal header parser, then the loader's readNpy). The input is the
// file's bytes, plain or gzip; the last byte's low bit picks an f32 or an i32 input.
#include <cstddef>
#include <cstdint>

#include "fuzz/fuzz_dataset.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dtl;
  bool integer = size > 0 && (data[size - 1] & 1);
  rt::data::FieldSpec f;
  f.source = "npy";
  f.path = fuzz::writeInput("input.npy", data, size);
  fuzz::loadAccepted(f, rt::data::probeNpy(f.path), integer);
  return 0;
}
