// Encoding helpers of the TCP store's frames (tcp_store_wire.h) and the
// small pieces of socket wording both ends share.
#include "runtime/comm/tcp_store_wire.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstring>
#include <limits>

#include "runtime/comm/tcp_store.h"

namespace dtl::rt::comm {

std::string formatDuration(std::chrono::milliseconds d) {
  long long ms = d.count();
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + " s";
  std::string s = std::to_string(ms / 1000) + "." + std::to_string(1000 + ms % 1000).substr(1);
  while (s.back() == '0') s.pop_back();
  return s + " s";
}

namespace wire {

void putU32(std::vector<uint8_t>& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

void putU64(std::vector<uint8_t>& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

uint32_t getU32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

uint64_t getU64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

std::vector<uint8_t> request(Op op, const std::string& key, const std::vector<uint8_t>& value) {
  std::vector<uint8_t> out;
  out.reserve(kRequestHeaderBytes + key.size() + 8 + value.size());
  out.push_back(op);
  putU32(out, static_cast<uint32_t>(key.size()));
  out.insert(out.end(), key.begin(), key.end());
  putU64(out, value.size());
  out.insert(out.end(), value.begin(), value.end());
  return out;
}

void putKeyList(std::vector<uint8_t>& out, const std::vector<std::string>& keys) {
  putU32(out, static_cast<uint32_t>(keys.size()));
  for (const std::string& k : keys) {
    putU32(out, static_cast<uint32_t>(k.size()));
    out.insert(out.end(), k.begin(), k.end());
  }
}

bool parseKeyList(const uint8_t* data, size_t size, size_t at, size_t max_key, std::vector<std::string>& keys) {
  if (at > size || size - at < 4) return false;
  uint32_t count = getU32(data + at);
  at += 4;
  if (count > (size - at) / 4) return false;  // each key needs at least its length
  keys.clear();
  keys.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    if (size - at < 4) return false;
    uint32_t len = getU32(data + at);
    at += 4;
    if (len > max_key || len > size - at) return false;
    keys.emplace_back(reinterpret_cast<const char*>(data + at), len);
    at += len;
  }
  return at == size;
}

Decoded decodeRequest(const uint8_t* data, size_t size, size_t max_key, size_t max_value, Request& out, size_t& used,
                      std::string& why) {
  if (size < kRequestHeaderBytes) return Decoded::kIncomplete;
  uint64_t klen = getU32(data + 1);
  if (klen > max_key) {
    why = "a key of " + std::to_string(klen) + " bytes (the limit is " + std::to_string(max_key) + ")";
    return Decoded::kMalformed;
  }
  if (size - kRequestHeaderBytes < klen + 8) return Decoded::kIncomplete;
  uint64_t vlen = getU64(data + kRequestHeaderBytes + klen);
  if (vlen > max_value) {
    why = "a value of " + std::to_string(vlen) + " bytes (the limit is " + std::to_string(max_value) + ")";
    return Decoded::kMalformed;
  }
  if (size - kRequestHeaderBytes - klen - 8 < vlen) return Decoded::kIncomplete;
  const uint8_t* k = data + kRequestHeaderBytes;
  const uint8_t* v = k + klen + 8;
  out.op = data[0];
  out.key.assign(reinterpret_cast<const char*>(k), klen);
  out.value.assign(v, v + vlen);
  used = kRequestHeaderBytes + klen + 8 + vlen;
  return Decoded::kRequest;
}

bool parseCounter(const std::vector<uint8_t>& v, int64_t& out) {
  if (v.empty()) {
    out = 0;
    return true;
  }
  const char* b = reinterpret_cast<const char*>(v.data());
  auto [end, ec] = std::from_chars(b, b + v.size(), out);
  return ec == std::errc() && end == b + v.size();
}

bool constantTimeEqual(const std::string& a, const std::string& b) {
  size_t n = std::max(a.size(), b.size());
  volatile unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff = diff | (x ^ y);
  }
  return diff == 0;
}

std::string hostPort(const std::string& host, int port) {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

std::string errnoText(int err) {
  std::string s = std::strerror(err);
  if (!s.empty()) s[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(s[0])));
  return s;
}

Clock::time_point deadlineAfter(std::chrono::milliseconds d) {
  constexpr std::chrono::milliseconds kMax = std::chrono::hours(24 * 365);
  if (d < std::chrono::milliseconds(0)) d = std::chrono::milliseconds(0);
  return Clock::now() + std::min(d, kMax);
}

int pollMillis(Clock::time_point deadline) {
  auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
  if (left <= 0) return 0;
  return static_cast<int>(std::min<long long>(left, std::numeric_limits<int>::max()));
}

}  // namespace wire
}  // namespace dtl::rt::comm
