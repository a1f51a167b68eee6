// The TCP store's wire format, shared by its server and client (internal).
//
// A request is   op:u8  key_len:u32  key  value_len:u64  value
// a reply is     status:u8  len:u64  payload
// all integers little-endian. The first request on a connection must be
// kAuth with key kStoreProtocol and the job token as value; anything else
// closes the connection. Per op:
//   kSet   key, value                      → kOk
//   kGet   key, value = timeout_ms:u64     → kOk value | kTimeout
//   kAdd   key, value = delta:i64          → kOk new:i64 | kError message
//   kWait  value = timeout_ms:u64 keyList  → kOk | kTimeout keyList (the missing)
// where keyList = count:u32 then (len:u32 key) per key.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace dtl::rt::comm::wire {

inline constexpr char kStoreProtocol[] = "dtl-store/1";

enum Op : uint8_t { kAuth = 1, kSet = 2, kGet = 3, kAdd = 4, kWait = 5 };
enum Reply : uint8_t { kOk = 0, kTimeout = 1, kError = 2 };

inline constexpr size_t kRequestHeaderBytes = 1 + 4;  // op, key_len; then key, then value_len:u64
// Before the token is accepted a peer may send only this much.
inline constexpr size_t kAuthMaxKeyBytes = 64;
inline constexpr size_t kAuthMaxValueBytes = 1024;

void putU32(std::vector<uint8_t>& out, uint32_t v);
void putU64(std::vector<uint8_t>& out, uint64_t v);
uint32_t getU32(const uint8_t* p);
uint64_t getU64(const uint8_t* p);

std::vector<uint8_t> request(Op op, const std::string& key, const std::vector<uint8_t>& value);
void putKeyList(std::vector<uint8_t>& out, const std::vector<std::string>& keys);
// Parses a keyList at data[at, size); false when malformed or a key is too long.
bool parseKeyList(const uint8_t* data, size_t size, size_t at, size_t max_key, std::vector<std::string>& keys);

// One request frame, decoded from the front of a connection's input.
struct Request {
  uint8_t op = 0;  // not checked here: the server refuses an unknown op
  std::string key;
  std::vector<uint8_t> value;
};
enum class Decoded { kRequest, kIncomplete, kMalformed };
// Decodes the request at data[0, size): kRequest with `used` bytes taken;
// kIncomplete when the frame is not all there yet; kMalformed, with `why`
// ("a key of 5000 bytes (the limit is 4096)"), as soon as a length field is
// over max_key or max_value, before waiting for the bytes it announces.
Decoded decodeRequest(const uint8_t* data, size_t size, size_t max_key, size_t max_value, Request& out, size_t& used,
                      std::string& why);
// A counter's stored value (what kAdd adds to): decimal int64 text, or empty for 0.
bool parseCounter(const std::vector<uint8_t>& v, int64_t& out);

// Equal without an early exit, so the time taken says nothing about the token.
bool constantTimeEqual(const std::string& a, const std::string& b);

// "127.0.0.1:29500", "[::1]:29500"
std::string hostPort(const std::string& host, int port);
// strerror text, lower-cased first letter: "connection refused".
std::string errnoText(int err);

using Clock = std::chrono::steady_clock;
// now + d, saturating so a huge timeout cannot overflow.
Clock::time_point deadlineAfter(std::chrono::milliseconds d);
// Milliseconds left until `deadline` (0 when past), capped for poll().
int pollMillis(Clock::time_point deadline);

}  // namespace dtl::rt::comm::wire
