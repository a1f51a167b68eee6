// libFuzzer target: the TCP store's wire decoder (runtime/comm/tcp_store_wire.cc),
// what the store's server does with the bytes a peer sends before and after
// the handshake. The input is a connection's byte stream: its first byte's
// low bit says whether the peer has already presented the token (the limits
// differ), the rest is decoded frame by frame as the server does (decodeRequest,
// then each op's value: get and add take 8 bytes, wait a timeout and a key
// list, and an add's counter text), each input also split at a point chosen by
// the input, as if it arrived in two reads. Re-encoding a decoded frame with
// request() must give its bytes back, and a key list must round-trip.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz/fuzz_file.h"
#include "runtime/comm/tcp_store.h"
#include "runtime/comm/tcp_store_wire.h"

namespace {

using dtl::fuzz::broken;
namespace wire = dtl::rt::comm::wire;

// The server's per-op checks (TcpStoreServer::Impl::handle) on one frame.
void decodeValue(const wire::Request& r) {
  if (r.op == wire::kWait && r.value.size() >= 8) {
    std::vector<std::string> keys;
    if (wire::parseKeyList(r.value.data(), r.value.size(), 8, dtl::rt::comm::kStoreMaxKeyBytes, keys)) {
      std::vector<uint8_t> again(r.value.begin(), r.value.begin() + 8);
      wire::putKeyList(again, keys);
      if (again != r.value) broken("a key list does not re-encode to its bytes");
    }
  }
  if ((r.op == wire::kGet || r.op == wire::kAdd) && r.value.size() == 8) (void)wire::getU64(r.value.data());
  int64_t counter = 0;
  if (wire::parseCounter(r.value, counter) && !r.value.empty() && r.value[0] != '-' &&
      std::to_string(counter).size() > r.value.size())
    broken("a counter parsed from more digits than it has");
}

// What a connection's bytes decode to: its frames, and whether it ends on a
// malformed one (the server closes the connection there).
struct Decoding {
  std::vector<wire::Request> frames;
  bool malformed = false;
};

// Decodes `in` as the server's consume() does, the bytes arriving in two
// reads: in[0, split), then the rest.
Decoding consume(const std::vector<uint8_t>& in, bool authed, size_t split) {
  size_t max_key = authed ? dtl::rt::comm::kStoreMaxKeyBytes : wire::kAuthMaxKeyBytes;
  size_t max_value = authed ? dtl::rt::comm::kStoreMaxValueBytes : wire::kAuthMaxValueBytes;
  Decoding out;
  size_t have = std::min(split, in.size());
  size_t at = 0;
  for (;;) {
    wire::Request r;
    size_t used = 0;
    std::string why;
    wire::Decoded d = wire::decodeRequest(in.data() + at, have - at, max_key, max_value, r, used, why);
    if (d == wire::Decoded::kMalformed) {
      if (why.empty()) broken("a malformed frame without a reason");
      out.malformed = true;
      return out;
    }
    if (d == wire::Decoded::kIncomplete) {
      if (have == in.size()) return out;
      have = in.size();  // the second read arrives
      continue;
    }
    if (used < wire::kRequestHeaderBytes + 8 || used > have - at) broken("decodeRequest took " + std::to_string(used) + " bytes");
    if (r.key.size() > max_key || r.value.size() > max_value) broken("a frame over the limits was decoded");
    std::vector<uint8_t> again = wire::request(static_cast<wire::Op>(r.op), r.key, r.value);
    if (again.size() != used || !std::equal(again.begin(), again.end(), in.begin() + static_cast<ptrdiff_t>(at)))
      broken("a decoded frame does not re-encode to its bytes");
    decodeValue(r);
    at += used;
    out.frames.push_back(std::move(r));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  bool authed = data[0] & 1;
  size_t split = data[0] >> 1;  // 0..127: where the first read ends
  std::vector<uint8_t> in(data + 1, data + size);
  Decoding whole = consume(in, authed, in.size());
  Decoding parts = consume(in, authed, split);
  bool same = whole.malformed == parts.malformed && whole.frames.size() == parts.frames.size();
  for (size_t k = 0; same && k < whole.frames.size(); ++k)
    same = whole.frames[k].op == parts.frames[k].op && whole.frames[k].key == parts.frames[k].key &&
           whole.frames[k].value == parts.frames[k].value;
  if (!same) broken("the bytes decode differently when they arrive in two reads (split at " + std::to_string(split) + ")");

  // A reply (status:u8 len:u64 payload) as the client reads it, and a key list
  // anywhere in the input.
  if (in.size() >= 9) {
    uint64_t len = wire::getU64(in.data() + 1);
    if (len <= in.size() - 9 && in[0] == wire::kTimeout) {
      std::vector<std::string> keys;
      (void)wire::parseKeyList(in.data() + 9, static_cast<size_t>(len), 0, dtl::rt::comm::kStoreMaxKeyBytes, keys);
    }
  }
  std::vector<std::string> keys;
  (void)wire::parseKeyList(in.data(), in.size(), split, dtl::rt::comm::kStoreMaxKeyBytes, keys);
  return 0;
}
