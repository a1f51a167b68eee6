// A PTX bundle: generated kernels with their inputs, written where LLVM is
// (tests/gpu/ptx_check.cc), run where a GPU is (ptx_run), whose outputs go
// back to be checked against the reference. The two sides share nothing but
// these files, so the GPU machine needs no LLVM and no dtl build.
//
// BUNDLE/manifest.txt, a line per item:
//   dtl-ptx-bundle 1
//   case ID FILE.ptx          a module; its kernels and buffers follow
//   kernel NAME THREADS       launch order; every kernel takes every buffer; blocks of a multiple of 32 threads
//   buffer in BYTES OFFSET    in argument order; an input's bytes at OFFSET of inputs.bin
//                             (-1: every f32 0.5, set on the device: a timing bundle's)
//   buffer out BYTES          an output: read back
//   buffer scratch BYTES
//   update ID FILE.ptx SYMBOL OFFSET COUNT
//                             a multi-tensor optimiser update (emit_update.h):
//                             SYMBOL(table, chunks, scalars), COUNT f32 scalars at OFFSET
//   chunk N PARAM GRAD A B    a table row: offsets of its n-element vectors in inputs.bin, -1 for none
//                             (its outputs: param, then a and b where present)
// RESULTS/results.txt:
//   dtl-ptx-results 1
//   device NAME...
//   case ID ok FILE OFFSET BYTES   the outputs, concatenated in buffer order
//   case ID error MESSAGE...
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dtl::ptxrun {

struct BundleKernel {
  std::string name;
  int64_t threads = 0;  // to launch at least (more are fine)
};

struct BundleBuffer {
  enum class Role { In, Out, Scratch };
  Role role = Role::In;
  int64_t bytes = 0;
  int64_t offset = 0;  // an input's, in inputs.bin; -1: filled on the device
};

struct BundleChunk {
  int64_t n = 0;
  int64_t param = -1, grad = -1, a = -1, b = -1;  // offsets in inputs.bin; -1: none
};

struct BundleCase {
  enum class Kind { Region, Update };
  Kind kind = Kind::Region;
  std::string id, ptx_file;
  // a region's kernels and buffers
  std::vector<BundleKernel> kernels;
  std::vector<BundleBuffer> buffers;
  // an update's kernel, scalars and table
  std::string symbol;
  int64_t scalars = 0, scalar_count = 0;
  std::vector<BundleChunk> chunks;
  int64_t outputBytes() const;
};

struct CaseResult {
  std::string id;
  bool ok = false;
  std::string error;              // when not ok
  std::string file;               // the outputs' file in RESULTS
  int64_t offset = 0, bytes = 0;  // where they are in it
};

// "" or what is wrong, with the line.
std::string writeManifest(const std::string& path, const std::vector<BundleCase>& cases);
std::string readManifest(const std::string& path, std::vector<BundleCase>* cases);
std::string writeResults(const std::string& path, const std::string& device, const std::vector<CaseResult>& results);
std::string readResults(const std::string& path, std::string* device, std::vector<CaseResult>* results);

}  // namespace dtl::ptxrun
