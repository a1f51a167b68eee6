// Element types shared by the compiler and the runtime.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace dtl {

enum class DType { F32, BF16, F16, I32, I64, U8, U16, Bool };

const char* dtypeName(DType t);
std::optional<DType> parseDType(const std::string& name);
int64_t dtypeBytes(DType t);
inline bool isFloat(DType t) { return t == DType::F32 || t == DType::BF16 || t == DType::F16; }
inline bool isInteger(DType t) {
  return t == DType::I32 || t == DType::I64 || t == DType::U8 || t == DType::U16;
}

}  // namespace dtl
