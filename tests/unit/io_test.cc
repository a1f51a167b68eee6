// Tests for runtime/io: safetensors round trips and byte-exact output (checked
// against the byte vectors in Python safetensors' own tests), every header
// corruption, checkpoint save/load/prune with failures and real crashes
// (fork + _exit) injected at every file-system step, metrics lines, progress lines.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>

#include "runtime/io/checkpoint_store.h"
#include "runtime/io/file_ops.h"
#include "runtime/io/metrics_writer.h"
#include "runtime/io/progress.h"
#include "runtime/io/safetensors.h"
#include "tests/unit/scratch_dir.h"

namespace dtl::rt::io {
namespace {

namespace fs = std::filesystem;

class Io : public dtl::testing::ScratchDirTest {
 protected:
  void TearDown() override {
    setFaultHookForTesting(nullptr);
    ScratchDirTest::TearDown();
  }
};

std::string slurp(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string le64(uint64_t v) {
  std::string s;
  for (int k = 0; k < 8; ++k) s += static_cast<char>(v >> (8 * k));
  return s;
}

std::string bytesOf(std::initializer_list<int> v) {
  std::string s;
  for (int b : v) s += static_cast<char>(b);
  return s;
}

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> b(n);
  for (size_t k = 0; k < n; ++k) b[k] = static_cast<uint8_t>(seed + 37 * k);
  return b;
}

TensorBlob blob(std::string name, std::string dtype, std::vector<int64_t> shape, uint8_t seed = 1) {
  int64_t n = dtypeSize(dtype);
  for (int64_t d : shape) n *= d;
  return {std::move(name), std::move(dtype), std::move(shape), pattern(static_cast<size_t>(n), seed)};
}

void expectSame(const std::vector<TensorBlob>& a, const std::vector<TensorBlob>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t k = 0; k < a.size(); ++k) {
    EXPECT_EQ(a[k].name, b[k].name);
    EXPECT_EQ(a[k].dtype, b[k].dtype) << a[k].name;
    EXPECT_EQ(a[k].shape, b[k].shape) << a[k].name;
    EXPECT_EQ(a[k].bytes, b[k].bytes) << a[k].name;
  }
}

// Every file and folder under `root`, relative, sorted.
std::vector<std::string> tree(const fs::path& root) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(root)) out.push_back(fs::relative(e.path(), root).string());
  std::sort(out.begin(), out.end());
  return out;
}

bool anyTemp(const fs::path& root) {
  for (const auto& n : tree(root))
    if (n.find(".tmp-") != std::string::npos || n.find(".trash-") != std::string::npos) return true;
  return false;
}

// ---------------------------------------------------------------- safetensors: reference bytes

// From safetensors/src/tensor.rs, test_serialization: {"attn.0": F32 [1, 2, 3] = 0..5}.
const std::string kReferenceAttn = bytesOf(
    {64,  0,   0,   0,   0,   0,   0,   0,   123, 34,  97,  116, 116, 110, 46,  48,  34,  58,  123, 34,  100, 116,
     121, 112, 101, 34,  58,  34,  70,  51,  50,  34,  44,  34,  115, 104, 97,  112, 101, 34,  58,  91,  49,  44,
     50,  44,  51,  93,  44,  34,  100, 97,  116, 97,  95,  111, 102, 102, 115, 101, 116, 115, 34,  58,  91,  48,
     44,  50,  52,  93,  125, 125, 0,   0,   0,   0,   0,   0,   128, 63,  0,   0,   0,   64,  0,   0,   64,  64,
     0,   0,   128, 64,  0,   0,   160, 64});
// test_serialization_forced_alignement: "attn0" F32 [1, 1, 2, 3], header padded with 7 spaces.
const std::string kReferenceAligned = bytesOf(
    {72,  0,   0,   0,   0,   0,   0,   0,   123, 34,  97,  116, 116, 110, 48,  34,  58,  123, 34,  100, 116, 121,
     112, 101, 34,  58,  34,  70,  51,  50,  34,  44,  34,  115, 104, 97,  112, 101, 34,  58,  91,  49,  44,  49,
     44,  50,  44,  51,  93,  44,  34,  100, 97,  116, 97,  95,  111, 102, 102, 115, 101, 116, 115, 34,  58,  91,
     48,  44,  50,  52,  93,  125, 125, 32,  32,  32,  32,  32,  32,  32,  0,   0,   0,   0,   0,   0,   128, 63,
     0,   0,   0,   64,  0,   0,   64,  64,  0,   0,   128, 64,  0,   0,   160, 64});
// test_empty: no tensors, with and without {"framework": "pt"}.
const std::string kReferenceEmpty = bytesOf({8, 0, 0, 0, 0, 0, 0, 0, 123, 125, 32, 32, 32, 32, 32, 32});
const std::string kReferenceEmptyMeta =
    bytesOf({40,  0,   0,   0,   0,   0,   0,   0,   123, 34,  95,  95,  109, 101, 116, 97, 100,
             97,  116, 97,  95,  95,  34,  58,  123, 34,  102, 114, 97,  109, 101, 119, 111, 114,
             107, 34,  58,  34,  112, 116, 34,  125, 125, 32,  32,  32,  32,  32});

std::vector<uint8_t> f32Bytes(std::initializer_list<float> v) {
  std::vector<uint8_t> b;
  for (float f : v) {
    uint8_t raw[4];
    std::memcpy(raw, &f, 4);
    b.insert(b.end(), raw, raw + 4);
  }
  return b;
}

TEST_F(Io, ReadsFilesWrittenByPythonSafetensors) {
  std::vector<TensorBlob> out;
  std::map<std::string, std::string> meta = {{"stale", "x"}};
  Status s = readSafetensors(write("a.safetensors", kReferenceAttn), out, &meta);
  ASSERT_TRUE(s.ok) << s.message;
  EXPECT_TRUE(meta.empty());
  expectSame(out, {{"attn.0", "F32", {1, 2, 3}, f32Bytes({0, 1, 2, 3, 4, 5})}});

  s = readSafetensors(write("b.safetensors", kReferenceAligned), out);
  ASSERT_TRUE(s.ok) << s.message;
  expectSame(out, {{"attn0", "F32", {1, 1, 2, 3}, f32Bytes({0, 1, 2, 3, 4, 5})}});

  s = readSafetensors(write("c.safetensors", kReferenceEmptyMeta), out, &meta);
  ASSERT_TRUE(s.ok) << s.message;
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(meta, (std::map<std::string, std::string>{{"framework", "pt"}}));
}

TEST_F(Io, WritesTheSameBytesAsPythonSafetensors) {
  struct Case {
    std::vector<TensorBlob> tensors;
    std::map<std::string, std::string> meta;
    const std::string& expected;
  } cases[] = {
      {{{"attn.0", "F32", {1, 2, 3}, f32Bytes({0, 1, 2, 3, 4, 5})}}, {}, kReferenceAttn},
      {{{"attn0", "F32", {1, 1, 2, 3}, f32Bytes({0, 1, 2, 3, 4, 5})}}, {}, kReferenceAligned},
      {{}, {}, kReferenceEmpty},
      {{}, {{"framework", "pt"}}, kReferenceEmptyMeta},
  };
  for (const Case& c : cases) {
    std::string p = path("w.safetensors");
    Status s = writeSafetensors(p, c.tensors, c.meta);
    ASSERT_TRUE(s.ok) << s.message;
    EXPECT_EQ(slurp(p), c.expected);
  }
}

// Hand-made like an older writer: header keys in name order, not offset order,
// every dtype size, a scalar, an empty tensor, odd sizes, metadata last.
TEST_F(Io, ReadsHandCraftedMixedFile) {
  std::string json =
      R"({"a.bf16":{"dtype":"BF16","shape":[3],"data_offsets":[20,26]},)"
      R"("b.empty":{"dtype":"F32","shape":[0,4],"data_offsets":[26,26]},)"
      R"("c.i64":{"dtype":"I64","shape":[1],"data_offsets":[0,8]},)"
      R"("d.scalar":{"dtype":"F32","shape":[],"data_offsets":[8,12]},)"
      R"("e.f16":{"dtype":"F16","shape":[2,2],"data_offsets":[12,20]},)"
      R"("f.u8":{"dtype":"U8","shape":[5],"data_offsets":[26,31]},)"
      R"("__metadata__":{"format":"pt","note":"caf\u00e9"}})";
  std::string data;
  for (int k = 0; k < 31; ++k) data += static_cast<char>(k * 7);
  std::string p = write("h.safetensors", le64(json.size()) + json + data);
  std::vector<TensorBlob> out;
  std::map<std::string, std::string> meta;
  Status s = readSafetensors(p, out, &meta);
  ASSERT_TRUE(s.ok) << s.message;
  auto slice = [&](int b, int e) { return std::vector<uint8_t>(data.begin() + b, data.begin() + e); };
  expectSame(out, {{"a.bf16", "BF16", {3}, slice(20, 26)},
                   {"b.empty", "F32", {0, 4}, {}},
                   {"c.i64", "I64", {1}, slice(0, 8)},
                   {"d.scalar", "F32", {}, slice(8, 12)},
                   {"e.f16", "F16", {2, 2}, slice(12, 20)},
                   {"f.u8", "U8", {5}, slice(26, 31)}});
  EXPECT_EQ(meta, (std::map<std::string, std::string>{{"format", "pt"}, {"note", "caf\xc3\xa9"}}));
}

// ---------------------------------------------------------------- safetensors: round trips

TEST_F(Io, RoundTripsEveryShapeAndDtype) {
  TensorBlob bf16{"x.bf16", "BF16", {2}, {0x80, 0x3f, 0xc0, 0xff}};  // 1.0, NaN
  std::vector<TensorBlob> tensors = {blob("blocks.attn.wq", "F32", {3, 5}),
                                     blob("empty", "F32", {0, 3}),
                                     blob("one", "F32", {1}),
                                     blob("scalar", "F64", {}),
                                     blob("odd.i64", "I64", {7}),
                                     blob("odd.u8", "U8", {13}),
                                     blob("odd.i32", "I32", {1, 3, 1}),
                                     blob("f16", "F16", {5}),
                                     bf16,
                                     blob("zero.dims", "U8", {4, 0, 2}),
                                     blob("tail", "U8", {1})};
  std::map<std::string, std::string> meta = {{"format", "pt"}, {"quote\"and\\", "line\nbreak"}};
  std::string p = path("rt.safetensors");
  Status s = writeSafetensors(p, tensors, meta);
  ASSERT_TRUE(s.ok) << s.message;
  std::string raw = slurp(p);
  uint64_t n = 0;
  for (int k = 7; k >= 0; --k) n = (n << 8) | static_cast<unsigned char>(raw[k]);
  EXPECT_EQ(n % 8, 0u);
  std::string header = safetensorsHeader(tensors, meta);
  EXPECT_EQ(raw.substr(8, n), header + std::string(n - header.size(), ' '));
  size_t data = 0;
  for (const auto& t : tensors) data += t.bytes.size();
  EXPECT_EQ(raw.size(), 8 + n + data);

  std::vector<TensorBlob> out;
  std::map<std::string, std::string> back;
  s = readSafetensors(p, out, &back);
  ASSERT_TRUE(s.ok) << s.message;
  expectSame(out, tensors);
  EXPECT_EQ(back, meta);
  EXPECT_FALSE(anyTemp(dir_));
}

TEST_F(Io, HeaderJsonIsExact) {
  std::vector<TensorBlob> t = {blob("w", "F32", {2, 3}), blob("b", "BF16", {3}), blob("e", "I64", {0})};
  std::string p = path("x.safetensors");
  ASSERT_TRUE(writeSafetensors(p, t, {{"format", "pt"}, {"a", "b"}}).ok);
  std::string expected =
      R"({"__metadata__":{"a":"b","format":"pt"},"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},)"
      R"("b":{"dtype":"BF16","shape":[3],"data_offsets":[24,30]},"e":{"dtype":"I64","shape":[0],"data_offsets":[30,30]}})";
  ASSERT_EQ(expected.size(), 207u);
  expected += " ";  // to 208, a multiple of 8
  EXPECT_EQ(slurp(p).substr(0, 8 + 208), le64(208) + expected);
}

TEST_F(Io, WriterRefusesBadTensorsAndCreatesNothing) {
  std::string p = path("bad.safetensors");
  struct Case {
    std::vector<TensorBlob> tensors;
    std::string message;
  } cases[] = {
      {{blob("w", "F12", {2})},
       p + ": tensor \"w\": unknown dtype \"F12\" (known: BOOL, U8, I8, F8_E5M2, F8_E4M3, I16, U16, F16, BF16, "
           "I32, U32, F32, F64, I64, U64)"},
      {{{"w", "F32", {2, 3}, pattern(20, 0)}}, p + ": tensor \"w\": shape [2, 3] F32 needs 24 bytes, got 20"},
      {{{"w", "F32", {-1}, {}}}, p + ": tensor \"w\": shape [-1] has a negative dimension or over 2^63 bytes"},
      {{blob("w", "U8", {1}), blob("w", "U8", {1})}, p + ": tensor \"w\": two tensors have this name"},
      {{blob("__metadata__", "U8", {1})}, p + ": tensor \"__metadata__\": the name is reserved for the metadata"},
  };
  for (const Case& c : cases) {
    Status s = writeSafetensors(p, c.tensors, {});
    EXPECT_FALSE(s.ok);
    EXPECT_EQ(s.message, c.message);
  }
  EXPECT_TRUE(tree(dir_).empty());
}

TEST_F(Io, FailedWriteLeavesTheOldFileAndNoTemp) {
  std::string p = path("m.safetensors");
  std::vector<TensorBlob> old = {blob("w", "F32", {4}, 1)};
  ASSERT_TRUE(writeSafetensors(p, old, {}).ok);
  std::string before = slurp(p);
  std::string tmp = p + ".tmp-" + std::to_string(getpid());
  const std::pair<const char*, std::string> steps[] = {
      {"open", p + ": cannot create " + tmp + ": Input/output error"},
      {"write", p + ": cannot write " + tmp + ": Input/output error"},
      {"fsync", p + ": cannot fsync " + tmp + ": Input/output error"},
      {"close", p + ": cannot close " + tmp + ": Input/output error"},
      {"rename", p + ": cannot rename " + tmp + " into place: Input/output error"}};
  for (const auto& [op, message] : steps) {
    setFaultHookForTesting([op = std::string(op)](const std::string& o, const std::string&) { return o == op ? EIO : 0; });
    Status s = writeSafetensors(p, {blob("w", "F32", {4}, 9)}, {});
    setFaultHookForTesting(nullptr);
    EXPECT_FALSE(s.ok) << op;
    EXPECT_EQ(s.message, message);
    EXPECT_EQ(slurp(p), before) << op;
    EXPECT_EQ(tree(dir_), std::vector<std::string>{"m.safetensors"}) << op;
  }
  // A real failure: the target is a directory, so the rename cannot replace it.
  fs::create_directories(path("d.safetensors/x"));
  Status s = writeSafetensors(path("d.safetensors"), old, {});
  EXPECT_EQ(s.message, path("d.safetensors") + ": cannot rename " + path("d.safetensors") + ".tmp-" +
                           std::to_string(getpid()) + " into place: Is a directory");
  EXPECT_FALSE(anyTemp(dir_));
}

// ---------------------------------------------------------------- safetensors: corruption

TEST_F(Io, ReportsEveryCorruption) {
  auto file = [](const std::string& json, size_t data) { return le64(json.size()) + json + std::string(data, '\0'); };
  const std::string w = R"("w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  struct Case {
    const char* name;
    std::string bytes;
    std::string message;  // after "PATH: "
  } cases[] = {
      {"empty", "", "truncated: the file has 0 bytes, fewer than the 8-byte header length"},
      {"short", std::string("\x10\0\0", 3), "truncated: the file has 3 bytes, fewer than the 8-byte header length"},
      {"absurd", le64(uint64_t{1} << 40) + "{}",
       "header length 1099511627776 is absurd (over 100 MiB); is this a safetensors file?"},
      {"absurd_ff", std::string(8, '\xff'),
       "header length 18446744073709551615 is absurd (over 100 MiB); is this a safetensors file?"},
      {"header_truncated", le64(4096) + "{\"w\":",
       "truncated: header says its JSON is 4096 bytes, file has 5 after the 8-byte length"},
      {"zero_header", le64(0), "header is not valid JSON (at byte 0: unexpected end of text, expected a value)"},
      {"bad_json", file("{\"w\":{\"dtype\":\"F32\",}}", 0),
       "header is not valid JSON (at byte 20: expected a string key)"},
      {"duplicate", file("{" + w + "," + w + "}", 8), "header is not valid JSON (at byte 54: duplicate key \"w\")"},
      {"not_object", file("[1,2]   ", 0), "header is not a JSON object"},
      {"unknown_dtype", file(R"({"w":{"dtype":"F12","shape":[2],"data_offsets":[0,8]}})", 8),
       "tensor \"w\": unknown dtype \"F12\" (known: BOOL, U8, I8, F8_E5M2, F8_E4M3, I16, U16, F16, BF16, I32, U32, "
       "F32, F64, I64, U64)"},
      {"missing_field", file(R"({"w":{"dtype":"F32","shape":[2]}})", 8),
       "tensor \"w\": expected {\"dtype\": \"…\", \"shape\": […], \"data_offsets\": [begin, end]}"},
      {"bad_shape", file(R"({"w":{"dtype":"F32","shape":[2,-1],"data_offsets":[0,8]}})", 8),
       "tensor \"w\": \"shape\" must be a list of non-negative integers"},
      {"float_shape", file(R"({"w":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}})", 8),
       "tensor \"w\": \"shape\" must be a list of non-negative integers"},
      {"reversed", file(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 8),
       "tensor \"w\": \"data_offsets\" must be [begin, end] with 0 <= begin <= end"},
      {"huge_shape", file(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", 8),
       "tensor \"w\": shape [4294967296, 4294967296] F32 is over 2^63 bytes"},
      {"size_mismatch", file(R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}})", 20),
       "tensor \"w\": shape [2, 3] F32 needs 24 bytes but data_offsets [0, 20] span 20"},
      {"data_truncated", file(R"({"w":{"dtype":"U8","shape":[4096],"data_offsets":[0,4096]}})", 1000),
       "truncated: header says 4096 bytes of data, file has 1000"},
      {"overlap",
       file(R"({"a":{"dtype":"F32","shape":[6],"data_offsets":[0,24]},"b":{"dtype":"F32","shape":[6],"data_offsets":[16,40]}})",
            40),
       "tensors \"a\" (data_offsets [0, 24]) and \"b\" ([16, 40]) overlap"},
      {"same_range",
       file(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})",
            4),
       "tensors \"a\" (data_offsets [0, 4]) and \"b\" ([0, 4]) overlap"},
      {"gap",
       file(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[4],"data_offsets":[8,12]}})",
            12),
       "no tensor covers data bytes [4, 8) before \"b\""},
      {"trailing", file(R"({"w":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})", 9),
       "the tensors cover 4 bytes of data but the file has 9 (trailing bytes after the last tensor)"},
      {"metadata_number", file(R"({"__metadata__":{"step":3}})", 0),
       "\"__metadata__\" value of \"step\" is not a string"},
      {"metadata_list", file(R"({"__metadata__":[]})", 0), "\"__metadata__\" is not a JSON object"},
  };
  for (const Case& c : cases) {
    std::string p = write(std::string(c.name) + ".safetensors", c.bytes);
    std::vector<TensorBlob> out = {blob("stale", "U8", {1})};
    std::map<std::string, std::string> meta = {{"stale", "x"}};
    Status s = readSafetensors(p, out, &meta);
    EXPECT_FALSE(s.ok) << c.name;
    EXPECT_EQ(s.message, p + ": " + c.message) << c.name;
    EXPECT_TRUE(out.empty()) << c.name;
    EXPECT_TRUE(meta.empty()) << c.name;
  }
}

TEST_F(Io, OpenErrorsNameTheFile) {
  std::vector<TensorBlob> out;
  Status s = readSafetensors(path("missing.safetensors"), out);
  EXPECT_EQ(s.message, path("missing.safetensors") + ": cannot open: No such file or directory");
  s = readSafetensors(dir_.string(), out);
  EXPECT_EQ(s.message, dir_.string() + ": cannot read: Is a directory");
}

// Every prefix of a valid file, and every single-byte change to its header, is an error or a
// valid read; never a crash, and never a read that disagrees with the header's sizes.
TEST_F(Io, TruncationAndBitFlipSweep) {
  std::string p = path("full.safetensors");
  ASSERT_TRUE(writeSafetensors(p, {blob("a", "F32", {3}), blob("b", "BF16", {2, 2}), blob("c", "U8", {0})},
                               {{"format", "pt"}})
                  .ok);
  std::string full = slurp(p);
  std::vector<TensorBlob> out;
  for (size_t n = 0; n < full.size(); ++n) {
    Status s = readSafetensors(write("cut.safetensors", full.substr(0, n)), out);
    EXPECT_FALSE(s.ok) << n;
  }
  uint64_t hlen = 0;
  for (int k = 7; k >= 0; --k) hlen = (hlen << 8) | static_cast<unsigned char>(full[k]);
  for (size_t at = 0; at < 8 + hlen; ++at) {
    for (int bit : {0x01, 0x20, 0x80}) {
      std::string bad = full;
      bad[at] = static_cast<char>(bad[at] ^ bit);
      Status s = readSafetensors(write("flip.safetensors", bad), out);
      if (!s.ok) continue;
      for (const auto& t : out) {
        int64_t n = dtypeSize(t.dtype);
        for (int64_t d : t.shape) n *= d;
        EXPECT_EQ(static_cast<size_t>(n), t.bytes.size()) << at;
      }
    }
  }
}

// ---------------------------------------------------------------- checkpoints

CheckpointContents contents(int64_t step, int variant = 0) {
  CheckpointContents c;
  c.step = step;
  auto seed = static_cast<uint8_t>(step * 3 + variant);
  c.params = {blob("embed.w", "F32", {5, 3}, seed), blob("blocks.attn.wq", "BF16", {2, 3, 3}, seed + 1),
              blob("blocks.ln.b", "F32", {0}, seed)};
  c.optimizer = {blob("embed.w.exp_avg", "F32", {5, 3}, seed + 2), blob("embed.w.exp_avg_sq", "F32", {5, 3}, seed + 3),
                 blob("blocks.attn.wq.momentum", "F32", {1}, seed + 4)};
  c.state_json = R"({"step": )" + std::to_string(step) + R"(, "epoch": 1, "cursor": [3, 17], "rng": "a9f3", "v": )" +
                 std::to_string(variant) + "}";
  return c;
}

void expectContents(const CheckpointContents& got, const CheckpointContents& want) {
  EXPECT_EQ(got.step, want.step);
  expectSame(got.params, want.params);
  expectSame(got.optimizer, want.optimizer);
  EXPECT_EQ(got.state_json, want.state_json);
}

std::string indexText(const std::vector<std::string>& names) {
  std::string s = "{\n  \"latest\": \"" + names.back() + "\",\n  \"checkpoints\": [\n";
  for (size_t k = 0; k < names.size(); ++k) s += "    \"" + names[k] + "\"" + (k + 1 < names.size() ? ",\n" : "\n");
  return s + "  ]\n}\n";
}

TEST_F(Io, CheckpointSaveAndLoad) {
  std::string dir = path("runs/fashion");  // created, parents too
  CheckpointStore store(dir + "/", 0);
  CheckpointContents c = contents(123);
  Status s = store.save(c);
  ASSERT_TRUE(s.ok) << s.message;
  EXPECT_EQ(tree(dir), (std::vector<std::string>{"index.json", "step-00000123", "step-00000123/optimizer.safetensors",
                                                  "step-00000123/params.safetensors", "step-00000123/state.json"}));
  EXPECT_EQ(slurp(dir + "/index.json"), indexText({"step-00000123"}));
  EXPECT_EQ(slurp(dir + "/step-00000123/state.json"), c.state_json);
  std::vector<TensorBlob> params;
  std::map<std::string, std::string> meta;
  ASSERT_TRUE(readSafetensors(dir + "/step-00000123/params.safetensors", params, &meta).ok);
  EXPECT_EQ(meta.at("format"), "pt");
  EXPECT_EQ(meta.at("step"), "123");
  EXPECT_EQ(meta.at("checksums"), "xxh64");  // the checksums themselves: checkpoint_integrity_test

  CheckpointContents back;
  s = CheckpointStore::loadLatest(dir, back);
  ASSERT_TRUE(s.ok) << s.message;
  expectContents(back, c);
  EXPECT_EQ(checkpointName(7), "step-00000007");
  EXPECT_EQ(checkpointName(123456789), "step-123456789");
}

TEST_F(Io, CheckpointKeepsTheNewestN) {
  std::string dir = path("ck");
  CheckpointStore store(dir, 2);
  for (int64_t step : {100, 200, 300, 400}) ASSERT_TRUE(store.save(contents(step)).ok);
  EXPECT_EQ(slurp(dir + "/index.json"), indexText({"step-00000300", "step-00000400"}));
  EXPECT_EQ(tree(dir), (std::vector<std::string>{"index.json", "step-00000300", "step-00000300/optimizer.safetensors",
                                                  "step-00000300/params.safetensors", "step-00000300/state.json",
                                                  "step-00000400", "step-00000400/optimizer.safetensors",
                                                  "step-00000400/params.safetensors", "step-00000400/state.json"}));
  std::vector<std::string> names;
  ASSERT_TRUE(CheckpointStore::list(dir, names).ok);
  EXPECT_EQ(names, (std::vector<std::string>{"step-00000300", "step-00000400"}));

  // keep 0 keeps everything, in the order saved; the latest is the last saved, not the largest step.
  std::string all = path("all");
  CheckpointStore keepAll(all, 0);
  for (int64_t step : {5, 9, 7}) ASSERT_TRUE(keepAll.save(contents(step)).ok);
  EXPECT_EQ(slurp(all + "/index.json"), indexText({"step-00000005", "step-00000009", "step-00000007"}));
  CheckpointContents back;
  ASSERT_TRUE(CheckpointStore::loadLatest(all, back).ok);
  expectContents(back, contents(7));

  // keep 1 after keep 0: the next save prunes down to one.
  ASSERT_TRUE(CheckpointStore(all, 1).save(contents(11)).ok);
  EXPECT_EQ(slurp(all + "/index.json"), indexText({"step-00000011"}));
  EXPECT_EQ(tree(all).size(), 5u);
}

TEST_F(Io, CheckpointResavingAStepReplacesIt) {
  std::string dir = path("ck");
  CheckpointStore store(dir, 3);
  ASSERT_TRUE(store.save(contents(10)).ok);
  ASSERT_TRUE(store.save(contents(20)).ok);
  ASSERT_TRUE(store.save(contents(10, 1)).ok);  // resumed from 10 and saved it again
  EXPECT_EQ(slurp(dir + "/index.json"), indexText({"step-00000020", "step-00000010"}));
  CheckpointContents back;
  ASSERT_TRUE(CheckpointStore::loadLatest(dir, back).ok);
  expectContents(back, contents(10, 1));
  EXPECT_FALSE(anyTemp(dir));

  // Where the file system cannot exchange two paths atomically, the fallback replaces it too.
  setFaultHookForTesting([](const std::string& op, const std::string&) { return op == "exchange" ? EINVAL : 0; });
  Status s = store.save(contents(10, 2));
  setFaultHookForTesting(nullptr);
  ASSERT_TRUE(s.ok) << s.message;
  ASSERT_TRUE(CheckpointStore::loadLatest(dir, back).ok);
  expectContents(back, contents(10, 2));
  EXPECT_FALSE(anyTemp(dir));
}

TEST_F(Io, CheckpointSaveRefusesBadInput) {
  std::string dir = path("ck");
  CheckpointContents c = contents(5);
  c.state_json = "{\"step\": 5,";
  Status s = CheckpointStore(dir, 0).save(c);
  EXPECT_EQ(s.message, dir + ": checkpoint step-00000005 not saved: the trainer state is not valid JSON (at byte 11: "
                             "expected a string key)");
  EXPECT_EQ(CheckpointStore(dir, -1).save(contents(5)).message,
            dir + ": checkpoint step-00000005 not saved: keep must be 0 (keep all) or more, got -1");
  EXPECT_EQ(CheckpointStore(dir, 0).save(contents(-1)).message,
            dir + ": checkpoint not saved: the step must not be negative, got -1");
  c = contents(5);
  c.params.push_back(c.params[0]);
  s = CheckpointStore(dir, 0).save(c);
  EXPECT_EQ(s.message, dir + ": checkpoint step-00000005 not saved: " + dir + "/.tmp-step-00000005-" +
                           std::to_string(getpid()) + "/params.safetensors: tensor \"embed.w\": two tensors have this name");
  EXPECT_TRUE(tree(dir).empty());
  // The directory is a file.
  write("file", "x");
  s = CheckpointStore(path("file/ck"), 0).save(contents(5));
  EXPECT_EQ(s.message, path("file/ck") + ": checkpoint step-00000005 not saved: " + path("file") +
                           ": cannot create a directory there: Not a directory");
}

TEST_F(Io, LoadLatestErrors) {
  CheckpointContents out;
  auto load = [&](const std::string& d) { return CheckpointStore::loadLatest(d, out).message; };
  std::string dir = path("ck");
  EXPECT_EQ(load(dir), dir + ": cannot resume: the directory does not exist");
  write("plain", "x");
  EXPECT_EQ(load(path("plain")), path("plain") + ": cannot resume: not a directory");
  fs::create_directories(dir);
  EXPECT_EQ(load(dir), dir + "/index.json: not found (no checkpoint has been completed in " + dir + ")");

  ASSERT_TRUE(CheckpointStore(dir, 0).save(contents(10)).ok);
  ASSERT_TRUE(CheckpointStore(dir, 0).save(contents(20)).ok);
  std::string index = dir + "/index.json", good = slurp(index);
  write("ck/index.json", "{\"latest\": ");
  EXPECT_EQ(load(dir), index + ": corrupt: not valid JSON (at byte 11: unexpected end of text, expected a value)");
  write("ck/index.json", R"({"latest": "../etc", "checkpoints": ["../etc"]})");
  EXPECT_EQ(load(dir), index + ": corrupt: expected {\"latest\": \"step-…\", \"checkpoints\": [\"step-…\", …]}");
  write("ck/index.json", R"({"latest": "step-00000020", "checkpoints": ["step-00000010"]})");
  EXPECT_EQ(load(dir), index + ": corrupt: \"latest\" (step-00000020) is not listed once in \"checkpoints\", or a "
                               "name is listed twice");
  write("ck/index.json", R"({"latest": "step-00000030", "checkpoints": ["step-00000030"]})");
  EXPECT_EQ(load(dir), dir + "/step-00000030: index.json names it as the latest checkpoint but it is missing");
  write("ck/index.json", good);

  std::string folder = dir + "/step-00000020";
  std::string params = slurp(folder + "/params.safetensors");
  write("ck/step-00000020/params.safetensors", params.substr(0, params.size() - 3));
  EXPECT_EQ(load(dir), folder + "/params.safetensors: truncated: header says 96 bytes of data, file has 93");
  write("ck/step-00000020/params.safetensors", params);
  fs::remove(folder + "/optimizer.safetensors");
  EXPECT_EQ(load(dir), folder + "/optimizer.safetensors: cannot open: No such file or directory");
  ASSERT_TRUE(CheckpointStore(dir, 0).save(contents(20)).ok);
  write("ck/step-00000020/state.json", "{\"step\": 20");
  EXPECT_EQ(load(dir).rfind(folder + "/state.json: does not match its checksum (stored ", 0), 0u) << load(dir);
  // A params file moved from another step.
  fs::copy_file(dir + "/step-00000010/params.safetensors", folder + "/params.safetensors",
                fs::copy_options::overwrite_existing);
  EXPECT_EQ(load(dir), folder + "/params.safetensors: holds step 10 but its folder says 20");
  EXPECT_EQ(out.step, 0);  // untouched by failed loads
  EXPECT_TRUE(out.params.empty());
}

TEST_F(Io, CheckpointSaveCleansLeftoversAndRebuildsAMissingIndex) {
  std::string dir = path("ck");
  CheckpointStore store(dir, 0);
  ASSERT_TRUE(store.save(contents(1)).ok);
  fs::remove(dir + "/index.json");  // as if the first save crashed before writing it
  fs::create_directories(dir + "/.tmp-step-00000002-99999/x");
  fs::create_directories(dir + "/.trash-step-00000000-99999");
  write("ck/index.json.tmp-99999", "{");
  ASSERT_TRUE(store.save(contents(2)).ok);
  EXPECT_EQ(slurp(dir + "/index.json"), indexText({"step-00000001", "step-00000002"}));
  EXPECT_FALSE(anyTemp(dir));
}

// Saving step 20 over a store holding steps 5 and 10 (keep 2), with the k-th file-system
// step failing: every failure leaves a loadable latest (10, or 20 once index.json is in
// place), no temp files, and a store the next save works on.
TEST_F(Io, CheckpointFailureAtEveryStep) {
  int failures = 0;
  for (int k = 0;; ++k) {
    std::string dir = path("fail" + std::to_string(k));
    CheckpointStore store(dir, 2);
    ASSERT_TRUE(store.save(contents(5)).ok);
    ASSERT_TRUE(store.save(contents(10)).ok);
    int count = 0;
    std::string failed_op;
    setFaultHookForTesting([&](const std::string& op, const std::string&) {
      if (count++ != k) return 0;
      failed_op = op;
      return ENOSPC;
    });
    Status s = store.save(contents(20));
    setFaultHookForTesting(nullptr);
    if (s.ok) {
      EXPECT_EQ(count, k) << "the save succeeded although step " << k << " failed";
      break;
    }
    ++failures;
    EXPECT_NE(s.message.find("No space left on device"), std::string::npos) << s.message;
    EXPECT_EQ(s.message.rfind(dir + ": checkpoint step-00000020 ", 0), 0u) << s.message;
    CheckpointContents back;
    Status l = CheckpointStore::loadLatest(dir, back);
    ASSERT_TRUE(l.ok) << "after failing step " << k << " (" << failed_op << "): " << l.message;
    expectContents(back, contents(back.step == 20 ? 20 : 10));
    bool saved = s.message.find(" saved, but ") != std::string::npos;
    EXPECT_EQ(back.step, saved ? 20 : 10) << k << " " << failed_op << ": " << s.message;
    EXPECT_FALSE(anyTemp(dir)) << k << " " << failed_op;
    ASSERT_TRUE(store.save(contents(30)).ok);
    ASSERT_TRUE(CheckpointStore::loadLatest(dir, back).ok);
    expectContents(back, contents(30));
    EXPECT_FALSE(anyTemp(dir));
  }
  EXPECT_GT(failures, 15);
}

// The same with real crashes: a child process dies (_exit) at the k-th step of the save.
TEST_F(Io, CheckpointCrashAtEveryStep) {
  int crashes = 0;
  for (int k = 0;; ++k) {
    std::string dir = path("crash" + std::to_string(k));
    CheckpointStore store(dir, 2);
    ASSERT_TRUE(store.save(contents(5)).ok);
    ASSERT_TRUE(store.save(contents(10)).ok);
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int count = 0;
      setFaultHookForTesting([&](const std::string&, const std::string&) {
        if (count++ == k) _exit(3);
        return 0;
      });
      _exit(store.save(contents(20)).ok ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    if (WEXITSTATUS(status) == 0) break;
    ASSERT_EQ(WEXITSTATUS(status), 3) << "the save failed without a crash at step " << k;
    ++crashes;
    CheckpointContents back;
    Status l = CheckpointStore::loadLatest(dir, back);
    ASSERT_TRUE(l.ok) << "after a crash at step " << k << ": " << l.message;
    ASSERT_TRUE(back.step == 10 || back.step == 20) << back.step;
    expectContents(back, contents(back.step));
    ASSERT_TRUE(store.save(contents(30)).ok);
    ASSERT_TRUE(CheckpointStore::loadLatest(dir, back).ok);
    expectContents(back, contents(30));
    EXPECT_FALSE(anyTemp(dir)) << k;
  }
  EXPECT_GT(crashes, 15);
}

TEST_F(Io, CheckpointReadOnlyDirectory) {
  if (geteuid() == 0) GTEST_SKIP() << "root ignores directory permissions; the fault hook tests cover this";
  std::string dir = path("ro");
  CheckpointStore store(dir, 0);
  ASSERT_TRUE(store.save(contents(10)).ok);
  fs::permissions(dir, fs::perms::owner_read | fs::perms::owner_exec);
  Status s = store.save(contents(20));
  fs::permissions(dir, fs::perms::owner_all);
  EXPECT_FALSE(s.ok);
  EXPECT_NE(s.message.find("Permission denied"), std::string::npos) << s.message;
  CheckpointContents back;
  ASSERT_TRUE(CheckpointStore::loadLatest(dir, back).ok);
  expectContents(back, contents(10));
  EXPECT_FALSE(anyTemp(dir));
}

// ---------------------------------------------------------------- metrics

TEST_F(Io, MetricsLinesAreExact) {
  std::string p = path("logs/metrics.jsonl");
  MetricsWriter m;
  ASSERT_TRUE(m.open(p).ok);
  m.write({{"loss", 0.41}, {"lr", 0.001}, {"samples_per_s", 5310.2}}, {{"step", 12}, {"epoch", 0}});
  EXPECT_EQ(slurp(p), "{\"step\": 12, \"epoch\": 0, \"loss\": 0.41, \"lr\": 0.001, \"samples_per_s\": 5310.2}\n")
      << "flushed before close";
  double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  m.write({{"loss", nan}, {"grad_norm", inf}, {"x", -inf}, {"third", 0.1 + 0.2}, {"tiny", 1e-300}, {"one", 1.0}},
          {{"step", 13}});
  m.write({{"eval_loss", 0.25}, {"eval_\"acc\"", 0.875}}, {});
  m.write({}, {{"big", INT64_MIN}});
  m.write({}, {});
  EXPECT_EQ(slurp(p),
            "{\"step\": 12, \"epoch\": 0, \"loss\": 0.41, \"lr\": 0.001, \"samples_per_s\": 5310.2}\n"
            "{\"step\": 13, \"loss\": null, \"grad_norm\": null, \"x\": null, \"third\": 0.30000000000000004, "
            "\"tiny\": 1e-300, \"one\": 1}\n"
            "{\"eval_loss\": 0.25, \"eval_\\\"acc\\\"\": 0.875}\n"
            "{\"big\": -9223372036854775808}\n"
            "{}\n");
  EXPECT_TRUE(m.status().ok);
  // Round trip: every value reads back as the same double.
  for (double v : {0.1, 1.0 / 3, 5310.2, 6.02214076e23, 2.2250738585072014e-308, -1e-7}) {
    std::string line = metricsLine({{"v", v}}, {});
    EXPECT_EQ(std::strtod(line.c_str() + 6, nullptr), v) << line;
  }
}

TEST_F(Io, MetricsAppendTruncateAndErrors) {
  std::string p = path("m.jsonl");
  {
    MetricsWriter m;
    ASSERT_TRUE(m.open(p).ok);
    m.write({{"loss", 1.5}}, {{"step", 1}});
  }
  {
    MetricsWriter m;
    ASSERT_TRUE(m.open(p, /*append=*/true).ok);
    m.write({{"loss", 1.25}}, {{"step", 2}});
  }
  EXPECT_EQ(slurp(p), "{\"step\": 1, \"loss\": 1.5}\n{\"step\": 2, \"loss\": 1.25}\n");
  {
    MetricsWriter m;
    ASSERT_TRUE(m.open(p).ok);
  }
  EXPECT_EQ(slurp(p), "");

  MetricsWriter m;
  m.write({{"loss", 1}}, {});
  EXPECT_EQ(m.status().message, "metrics: write before open");
  Status s = m.open(dir_.string());
  EXPECT_EQ(s.message, dir_.string() + ": cannot open the metrics file: Is a directory");
  EXPECT_EQ(m.status().message, s.message);
  if (fs::exists("/dev/full")) {
    ASSERT_TRUE(m.open("/dev/full").ok);
    m.write({{"loss", 1}}, {});
    EXPECT_EQ(m.status().message, "/dev/full: cannot write a metrics line: No space left on device");
  }
}

// ---------------------------------------------------------------- progress

TEST(Progress, TerminalLineIsRewrittenInPlace) {
  double now = 1000;
  Progress p(2000, /*is_tty=*/true, /*gemm_flops_per_s=*/0, [&] { return now; });
  EXPECT_EQ(p.finish(), "");
  p.begin();
  now = 1000.5;  // the first step: 64 samples in 0.5 s
  StepView v = p.step(1, 0.5, 1e-3, 0.25, 0.5, 64, 0, 0);
  EXPECT_EQ(p.line(v), "\rstep 1/2000  loss 0.5000  128 samples/s  500 ms/step  lr 0.001  grad 0.25  ETA 16m40s\x1b[K");
  EXPECT_EQ(p.finish(), "\n");
}

TEST(Progress, PlainLinesWithEveryField) {
  double now = 0;
  Progress p(2000, /*is_tty=*/false, /*gemm_flops_per_s=*/1e10, [&] { return now; });
  p.begin();
  now = 0.02;  // 512 samples of 64 tokens and 1e8 FLOPs in 20 ms
  StepView v = p.step(1, 2.302585, 3e-4, 1.5, 0.0195, 512, 512 * 64, 1e8);
  EXPECT_DOUBLE_EQ(v.samples_per_s, 25600);
  EXPECT_DOUBLE_EQ(v.tokens_per_s, 25600 * 64);
  EXPECT_DOUBLE_EQ(v.flops_per_s, 5e9);
  EXPECT_DOUBLE_EQ(v.mfu, 0.5);
  EXPECT_NEAR(v.eta_s, 1999 * 0.02, 1e-9);
  EXPECT_DOUBLE_EQ(v.elapsed_s, 0.02);
  EXPECT_EQ(p.line(v),
            "step 1/2000  loss 2.3026  25,600 samples/s  1,638,400 tokens/s  19.5 ms/step  lr 0.0003  grad 1.5  "
            "5.00 GFLOP/s  MFU 50%  ETA 40s\n");
  now = 0.04;
  v = p.step(2000, 0.0001234, 3e-4, std::nan(""), 0.02, 512, 0, 1e8);
  EXPECT_EQ(p.line(v), "step 2000/2000  loss 1.234e-04  25,600 samples/s  20.0 ms/step  lr 0.0003  5.00 GFLOP/s  MFU 50%  ETA 0s\n");
  EXPECT_EQ(p.finish(), "");

  // A window faster than the probe raises the reference: MFU never reads
  // over 100 %, and later windows are against the rate the job showed.
  {
    double t = 0;
    Progress q(0, false, /*gemm_flops_per_s=*/1e10, [&] { return t; });
    q.begin();
    t = 0.02;
    EXPECT_DOUBLE_EQ(q.step(1, 1, 1e-3, 1, 0.02, 1, 0, 1e8).mfu, 0.5);  // 5e9 against the probe's 1e10
    t = 0.025;
    EXPECT_DOUBLE_EQ(q.step(2, 1, 1e-3, 1, 0.005, 1, 0, 4e8).mfu, 1.0);  // 2e10 over the window: the new reference
    t = 0.125;
    EXPECT_DOUBLE_EQ(q.step(3, 1, 1e-3, 1, 0.1, 1, 0, 1e8).mfu, 0.24);  // 4.8e9 against 2e10
  }

  Progress open_ended(0, false, 0, [] { return 0.0; });  // total unknown: no "/total", no ETA
  open_ended.begin();
  v = open_ended.step(7, std::nan(""), 0.1, 2, 0, 8, 0, 0);
  EXPECT_TRUE(std::isnan(v.eta_s));
  EXPECT_EQ(open_ended.line(v), "step 7  loss nan  0.0 samples/s  0.00 ms/step  lr 0.1  grad 2\n");
}

// The throughput is the current one: over the last steps, not since the start.
TEST(Progress, RateWindowForgetsOldSteps) {
  RateWindow w(/*steps=*/4, /*seconds=*/10);
  EXPECT_EQ(w.samplesPerSecond(), 0);
  EXPECT_TRUE(std::isnan(w.secondsPerStep()));
  w.start(0);
  for (int i = 1; i <= 10; ++i) w.add(i * 1.0, 100, 0, 0);  // 100 samples/s for 10 s
  EXPECT_DOUBLE_EQ(w.samplesPerSecond(), 100);
  for (int i = 1; i <= 4; ++i) w.add(10 + i * 0.1, 100, 0, 0);  // then 1000 samples/s
  EXPECT_NEAR(w.samplesPerSecond(), 1000, 1e-9);  // the 4 newest steps only
  EXPECT_NEAR(w.secondsPerStep(), 0.1, 1e-12);
  w.add(11.4, 100, 0, 0);
  EXPECT_NEAR(w.samplesPerSecond(), 400 / 1.3, 1e-9);  // 4 steps from 10.1 to 11.4

  RateWindow slow(/*steps=*/20, /*seconds=*/10);
  slow.start(0);
  for (int i = 1; i <= 5; ++i) slow.add(i * 4.0, 8, 0, 0);  // 4 s a step: 10 s hold two or three
  EXPECT_DOUBLE_EQ(slow.samplesPerSecond(), 2);
  slow.add(21, 80, 0, 0);  // a fast step after slow ones: the window reaches back just past 10 s
  EXPECT_NEAR(slow.samplesPerSecond(), (3 * 8 + 80) / 13.0, 1e-12);  // the steps ending at 12 … 21, from 8
}

TEST(Progress, CheckpointLineAndSummary) {
  EXPECT_EQ(Progress::checkpointLine(200, "runs/x/step-00000200", 12897485, 0.04),
            "[ckpt] step 200 \u2192 runs/x/step-00000200 (12.3 MiB, 40.0 ms)");
  RunSummary s;
  s.steps = 2000;
  s.wall_s = 161;
  s.samples_per_s = 5310.4;
  s.final_eval_step = 2000;
  s.final_eval = {{"loss", 0.42118}, {"accuracy", 0.8518}};
  s.best_eval_step = 1500;
  s.best_eval = {{"loss", 0.4105}, {"accuracy", 0.86011}};
  s.checkpoint = "runs/x/step-00002000";
  s.metrics = "runs/x/metrics.jsonl";
  s.peak_rss_bytes = {432537600};
  EXPECT_EQ(Progress::summary(s),
            "done: 2000 steps in 2m41s (5,310 samples/s)\n"
            "  final eval: loss 0.4212, accuracy 0.8518 (after step 2000)\n"
            "  best eval (lowest loss): loss 0.4105, accuracy 0.8601 (after step 1500)\n"
            "  checkpoint: runs/x/step-00002000\n"
            "  metrics: runs/x/metrics.jsonl\n"
            "  peak memory: 412.5 MiB\n");
  s.peak_rss_bytes = {432537600, 1048576, -1};
  EXPECT_NE(Progress::summary(s).find("\n  peak memory per rank: 0: 412.5 MiB, 1: 1.0 MiB, 2: unknown\n"), std::string::npos);
  s.peak_rss_bytes.assign(9, 2048);
  s.peak_rss_bytes[4] = 1024;
  s.peak_rss_bytes[7] = 4096;
  EXPECT_NE(Progress::summary(s).find("\n  peak memory per rank: 1.0 KiB (rank 4) to 4.0 KiB (rank 7) over 9 ranks\n"),
            std::string::npos)
      << Progress::summary(s);
  // Where a step went: the mean of each part over the steps, the rest as "other".
  s.peak_rss_bytes = {432537600};
  s.parts.steps = 4;
  s.parts.step_s = 0.040;
  s.parts.compute_s = 0.030;
  s.parts.update_s = 0.004;
  s.parts.batch_s = 0.002;
  s.parts.guard_s = 0.0008;
  EXPECT_NE(Progress::summary(s).find("done: 2000 steps in 2m41s (5,310 samples/s)\n"
                                      "  a step, mean of 4: 10.0 ms = forward+backward 7.50 ms, update 1.00 ms, "
                                      "batch 0.50 ms, checks 0.20 ms, other 0.80 ms\n"
                                      "  final eval: "),
            std::string::npos)
      << Progress::summary(s);
  RunSummary bare;
  bare.steps = 1;
  EXPECT_EQ(Progress::summary(bare), "done: 1 step in 0s (0.0 samples/s)\n  checkpoint: none written\n");
}

// The eval line shows what running.md shows (four decimals), not every digit
// the metrics file keeps.
TEST(Progress, EvalLineShowsFourDecimals) {
  EXPECT_EQ(Progress::evalLine(468, {{"loss", 0.42118818115887343}, {"accuracy", 0.85176282051282048}}),
            "eval after step 468: loss 0.4212, accuracy 0.8518");
  EXPECT_EQ(Progress::evalLine(3, {{"loss", 0.00012345678}, {"err", std::nan("")}}),
            "eval after step 3: loss 1.235e-04, err nan");
}

TEST(Progress, Pieces) {
  EXPECT_EQ(Progress::formatRate(999.4), "999");
  EXPECT_EQ(Progress::formatRate(999.5), "1,000");
  EXPECT_EQ(Progress::formatRate(99.94), "99.9");
  EXPECT_EQ(Progress::formatRate(99.96), "100");
  EXPECT_EQ(Progress::formatRate(100), "100");
  EXPECT_EQ(Progress::formatRate(std::numeric_limits<double>::infinity()), "--");
  EXPECT_EQ(Progress::formatDuration(0), "0s");
  EXPECT_EQ(Progress::formatDuration(59.4), "59s");
  EXPECT_EQ(Progress::formatDuration(59.6), "1m00s");
  EXPECT_EQ(Progress::formatDuration(161), "2m41s");
  EXPECT_EQ(Progress::formatDuration(3600), "1h00m");
  EXPECT_EQ(Progress::formatDuration(90061), "1d01h");
  EXPECT_EQ(Progress::formatDuration(1e12), ">30y");
  EXPECT_EQ(Progress::formatLoss(0), "0.0000");
  EXPECT_EQ(Progress::formatLoss(-1.5), "-1.5000");
  EXPECT_EQ(Progress::formatLoss(12345.678), "12345.6780");
  EXPECT_EQ(Progress::formatLoss(-std::numeric_limits<double>::infinity()), "-inf");
  EXPECT_EQ(Progress::formatSeconds(0.0123), "12.3 ms");
  EXPECT_EQ(Progress::formatSeconds(0.00042), "0.42 ms");
  EXPECT_EQ(Progress::formatSeconds(1.234), "1.23 s");
  EXPECT_EQ(Progress::formatSeconds(125), "2m05s");
  EXPECT_EQ(Progress::formatFlops(3.214e9), "3.21 GFLOP/s");
  EXPECT_EQ(Progress::formatFlops(999.4), "999 FLOP/s");
  EXPECT_EQ(Progress::formatFlops(999.6e12), "1.00 PFLOP/s");
  EXPECT_EQ(Progress::formatBytes(97), "97 B");
  EXPECT_EQ(Progress::formatBytes(1536), "1.5 KiB");
  EXPECT_EQ(Progress::formatNumber(0.00031415), "0.000314");
  EXPECT_EQ(Progress::formatNumber(1234.5), "1.23e+03");
}

}  // namespace
}  // namespace dtl::rt::io
