// Reads and writes safetensors files (https://github.com/huggingface/safetensors):
// an 8-byte little-endian header length N, N bytes of JSON padded with spaces
// to a multiple of 8, then the tensors' bytes back to back. Compatible both ways
// with Python's safetensors and PyTorch; no memory mapping, no dtype conversion.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "runtime/io/status.h"

namespace dtl::rt::io {

struct TensorBlob {
  std::string name;
  std::string dtype;  // a safetensors tag: "F32", "I32", "I64", "U8", "BF16", "F16", "F64", … (see dtypeSize)
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;  // little-endian, C order; shape product × dtype size bytes
};

// Bytes per element of a safetensors dtype tag, or 0 for a tag it does not know.
// Known: BOOL U8 I8 F8_E5M2 F8_E4M3 I16 U16 F16 BF16 I32 U32 F32 F64 I64 U64.
int64_t dtypeSize(const std::string& dtype);

// The header JSON exactly as writeSafetensors writes it, before padding:
// {"__metadata__":{…},"name":{"dtype":…,"shape":[…],"data_offsets":[b,e]},…}
// with "__metadata__" first (as Python's safetensors writes it) and left out
// when empty, tensors in the order given, offsets contiguous from 0.
std::string safetensorsHeader(const std::vector<TensorBlob>& tensors, const std::map<std::string, std::string>& metadata);

// Writes atomically (see writeFileAtomic). Checks every tensor first (known
// dtype, bytes matching the shape, unique names, no "__metadata__") and
// creates nothing if one is wrong.
Status writeSafetensors(const std::string& path, const std::vector<TensorBlob>& tensors,
                        const std::map<std::string, std::string>& metadata);

// Reads every tensor, in header order, after checking the whole header the way
// Python's safetensors does: length at most 100 MiB and within the file, JSON
// well formed, dtypes known, each tensor's bytes matching its shape, and the
// tensors tiling the data exactly (no overlap, no gap, no trailing bytes).
// On error `out` is empty and the message starts with the path.
Status readSafetensors(const std::string& path, std::vector<TensorBlob>& out,
                       std::map<std::string, std::string>* metadata = nullptr);

}  // namespace dtl::rt::io
