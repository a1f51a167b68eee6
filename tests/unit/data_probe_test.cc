// Tests for runtime/data/probe.h: each probe on small files written into a
// fresh temp dir (valid, compressed, and every error path), the real datasets
// when installed, and a truncation/corruption sweep that must never crash.
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <climits>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "runtime/data/literal.h"
#include "runtime/data/probe.h"
#include "tests/unit/scratch_dir.h"

namespace fs = std::filesystem;
using namespace dtl::rt::data;

namespace {

class Probe : public dtl::testing::ScratchDirTest {
 protected:
  static std::string gzBytes(const std::string& bytes) {  // in-memory gzip, for corrupting
    z_stream z{};
    deflateInit2(&z, 6, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY);
    std::string out(deflateBound(&z, bytes.size()) + 32, '\0');
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
    z.avail_in = static_cast<uInt>(bytes.size());
    z.next_out = reinterpret_cast<Bytef*>(out.data());
    z.avail_out = static_cast<uInt>(out.size());
    deflate(&z, Z_FINISH);
    out.resize(z.total_out);
    deflateEnd(&z);
    return out;
  }

};

std::string be32(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8), static_cast<char>(v)};
}
std::string le(uint64_t v, int n) {
  std::string s;
  for (int k = 0; k < n; ++k) s += static_cast<char>(v >> (8 * k));
  return s;
}

std::string idx(unsigned char type, const std::vector<uint32_t>& dims, size_t data_bytes) {
  std::string s{'\0', '\0', static_cast<char>(type), static_cast<char>(dims.size())};
  for (uint32_t d : dims) s += be32(d);
  return s + std::string(data_bytes, '\x07');
}

std::string npy(int major, const std::string& dict, size_t data_bytes) {
  int len_bytes = major == 1 ? 2 : 4;
  std::string header = dict;
  while ((8 + len_bytes + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  return std::string("\x93NUMPY", 6) + static_cast<char>(major) + '\0' + le(header.size(), len_bytes) + header +
         std::string(data_bytes, '\0');
}

std::string safetensors(const std::string& json, size_t data_bytes) {
  return le(json.size(), 8) + json + std::string(data_bytes, '\0');
}

// The error must be a sentence about `path` that says each of `parts`.
void expectError(const ProbeResult& r, const std::string& path, std::initializer_list<std::string> parts) {
  ASSERT_FALSE(r.ok) << "expected an error";
  EXPECT_NE(r.error.find(path), std::string::npos) << r.error;
  for (const auto& p : parts) EXPECT_NE(r.error.find(p), std::string::npos) << "missing '" << p << "' in: " << r.error;
}

void expectInfo(const ProbeResult& r, int64_t samples, std::vector<int64_t> dims, const std::string& dtype,
                ElemKind kind) {
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.info.samples, samples);
  EXPECT_EQ(r.info.sample_dims, dims);
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  EXPECT_EQ(r.info.sample_elements, n);
  EXPECT_EQ(r.info.dtype, dtype);
  EXPECT_EQ(r.info.kind, kind);
}

// ---------------------------------------------------------------- files in general

TEST_F(Probe, OpenErrorsNameTheFile) {
  std::string missing = (dir_ / "x.csv").string();
  auto r = probeCsv(missing, {});
  expectError(r, missing, {"cannot open '" + missing + "': No such file or directory"});
  expectError(probeIdx(dir_.string()), dir_.string(), {"Is a directory"});
  expectError(probeText("/dev/null", 4), "/dev/null", {"not a regular file"});
  for (auto* f : {&probeNpy, &probeIdx}) expectError(f(missing), missing, {"cannot open"});
  expectError(probeSafetensors(missing, "k"), missing, {"cannot open"});
  expectError(probeTokens(missing, "u16", 4), missing, {"cannot open"});
}

// ---------------------------------------------------------------- IDX

TEST_F(Probe, IdxPlainAndGzip) {
  expectInfo(probeIdx(write("a.idx", idx(0x08, {5, 3, 4}, 60))), 5, {3, 4}, "u8", ElemKind::Int);
  expectInfo(probeIdx(writeGz("a.idx.gz", idx(0x08, {5, 3, 4}, 60))), 5, {3, 4}, "u8", ElemKind::Int);
  expectInfo(probeIdx(write("labels", idx(0x08, {7}, 7))), 7, {}, "u8", ElemKind::Int);
  expectInfo(probeIdx(write("i8", idx(0x09, {2, 2}, 4))), 2, {2}, "i8", ElemKind::Int);
  expectInfo(probeIdx(write("i16", idx(0x0B, {2, 2}, 8))), 2, {2}, "i16", ElemKind::Int);
  expectInfo(probeIdx(write("i32", idx(0x0C, {2, 2}, 16))), 2, {2}, "i32", ElemKind::Int);
  expectInfo(probeIdx(write("f32", idx(0x0D, {2, 2}, 16))), 2, {2}, "f32", ElemKind::Float);
  expectInfo(probeIdx(writeGz("f64.gz", idx(0x0E, {2, 2}, 32))), 2, {2}, "f64", ElemKind::Float);
  expectInfo(probeIdx(write("extra", idx(0x08, {2, 2}, 9))), 2, {2}, "u8", ElemKind::Int);  // trailing bytes are fine
}

// A gzip file's probe is remembered for the process (one run probes each
// file two or three times) only while the file stays the same: rewritten in
// place within the same second, with the same size or not, or damaged, it is
// probed again.
TEST_F(Probe, GzipProbesAreRememberedOnlyWhileTheFileIsUnchanged) {
  const std::string p = writeGz("same.idx.gz", idx(0x08, {4, 6}, 24));
  expectInfo(probeIdx(p), 4, {6}, "u8", ElemKind::Int);
  expectInfo(probeIdx(p), 4, {6}, "u8", ElemKind::Int);
  writeGz("same.idx.gz", idx(0x08, {6, 4}, 24));  // the same uncompressed bytes, another header
  expectInfo(probeIdx(p), 6, {4}, "u8", ElemKind::Int);
  writeGz("same.idx.gz", idx(0x08, {3, 4}, 12));
  expectInfo(probeIdx(p), 3, {4}, "u8", ElemKind::Int);
  const std::string gz = gzBytes(idx(0x08, {3, 4}, 12));
  write("same.idx.gz", gz.substr(0, gz.size() - 12));
  expectError(probeIdx(p), p, {"gzip data ends early (the file is truncated)"});
  // Another probe of the same file (text windows) is not the idx probe's answer.
  writeGz("same.idx.gz", std::string(1001, 'b'));
  expectInfo(probeText(p, 100), 10, {100}, "i32", ElemKind::Int);
}

TEST_F(Probe, IdxErrors) {
  std::string p = write("empty", "");
  expectError(probeIdx(p), p, {"is 0 bytes", "expected at least 4"});
  p = write("short", std::string("\0\0\x08", 3));
  expectError(probeIdx(p), p, {"3 bytes"});
  // A doubly compressed file: one gunzip still leaves gzip magic.
  p = write("x.gz", gzBytes(gzBytes(idx(0x08, {1}, 1))));
  expectError(probeIdx(p), p, {"not an IDX file (magic bytes 1f 8b 08 00; expected 00 00 then a type byte)"});
  p = write("type", idx(0x07, {1}, 1));
  expectError(probeIdx(p), p, {"unknown IDX element type 0x07"});
  p = write("nodims", idx(0x08, {}, 4));
  expectError(probeIdx(p), p, {"0 dimensions"});
  p = write("cut", idx(0x08, {2, 2, 2}, 0).substr(0, 10));
  expectError(probeIdx(p), p, {"declares 3 dimensions", "16 header bytes", "ends after 10 bytes"});
  p = write("neg", idx(0x08, {0xFFFFFFFFu, 2}, 0));
  expectError(probeIdx(p), p, {"dimension 0 is ff ff ff ff", "negative"});
  p = write("huge", idx(0x0E, {0x7FFFFFFF, 0x7FFFFFFF, 0x7FFFFFFF}, 0));
  expectError(probeIdx(p), p, {"more than 2^63 bytes"});
  p = write("data", idx(0x08, {2, 3, 4}, 23));
  expectError(
      probeIdx(p), p,
      {"file is 39 bytes but the header describes 2×3×4 u8 (24 bytes of data after a 16-byte header, 40 in all)"});
  p = writeGz("data.gz", idx(0x0D, {2, 3}, 20));
  expectError(probeIdx(p), p, {"decompresses to 32 bytes", "2×3 f32 (24 bytes of data"});
  p = write("zero", idx(0x08, {0, 5}, 0));
  expectError(probeIdx(p), p, {"no samples"});
  // A 20-byte file promising 973 million empty samples (fuzz/regressions/idx/).
  p = write("empty-samples", idx(0x0E, {0x3A000000, 0}, 0));
  expectError(probeIdx(p), p, {"holds no values (973078528×0: each of its 973078528 samples is empty)"});
}

TEST_F(Probe, GzipDamage) {
  std::string gz = gzBytes(idx(0x08, {100, 10}, 1000));
  std::string p = write("trunc.gz", gz.substr(0, gz.size() - 12));
  expectError(probeIdx(p), p, {"gzip data ends early (the file is truncated)"});
  std::string bad = gz;
  bad[bad.size() - 6] ^= 0x55;  // inside the CRC-32 trailer
  p = write("crc.gz", bad);
  expectError(probeIdx(p), p, {"cannot decompress"});
  EXPECT_FALSE(probeText(p, 4).ok);
}

// ---------------------------------------------------------------- npy

TEST_F(Probe, NpyVersionsAndDtypes) {
  const std::string d = "{'descr': '<f4', 'fortran_order': False, 'shape': (6, 2, 3), }";
  expectInfo(probeNpy(write("v1.npy", npy(1, d, 144))), 6, {2, 3}, "f32", ElemKind::Float);
  expectInfo(probeNpy(write("v2.npy", npy(2, d, 144))), 6, {2, 3}, "f32", ElemKind::Float);
  expectInfo(probeNpy(write("v3.npy", npy(3, d, 144))), 6, {2, 3}, "f32", ElemKind::Float);
  expectInfo(probeNpy(writeGz("v1.npy.gz", npy(1, d, 144))), 6, {2, 3}, "f32", ElemKind::Float);
  struct {
    const char* descr;
    const char* dtype;
    int size;
    ElemKind kind;
  } cases[] = {{"<f8", "f64", 8, ElemKind::Float}, {"<i4", "i32", 4, ElemKind::Int},  {"<i8", "i64", 8, ElemKind::Int},
               {"|u1", "u8", 1, ElemKind::Int},    {"<u2", "u16", 2, ElemKind::Int},  {"|i1", "i8", 1, ElemKind::Int},
               {"<i2", "i16", 2, ElemKind::Int},   {"<f2", "f16", 2, ElemKind::Float}};
  for (const auto& c : cases) {
    std::string dict = std::string("{\"descr\": \"") + c.descr + "\", \"fortran_order\": False, \"shape\": (4,)}";
    expectInfo(probeNpy(write(std::string("t_") + c.dtype + ".npy", npy(1, dict, 4 * c.size))), 4, {}, c.dtype, c.kind);
  }
  // Python 2 wrote longs with an L suffix.
  expectInfo(probeNpy(write("py2.npy", npy(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (3L, 2L), }", 48))), 3,
             {2}, "i64", ElemKind::Int);
}

TEST_F(Probe, NpyErrors) {
  auto dict = [](const std::string& descr, const std::string& fortran, const std::string& shape) {
    return "{'descr': '" + descr + "', 'fortran_order': " + fortran + ", 'shape': " + shape + ", }";
  };
  std::string p = write("magic.npy", "PK\x03\x04 not numpy");
  expectError(probeNpy(p), p, {"not a .npy file (starts with 50 4b 03 04", "expected 93 4e 55 4d 50 59"});
  p = write("empty.npy", "");
  expectError(probeNpy(p), p, {"not a .npy file (starts with nothing"});
  std::string v9 = npy(1, dict("<f4", "False", "(1,)"), 4);
  v9[6] = 9;
  p = write("v9.npy", v9);
  expectError(probeNpy(p), p, {"unsupported .npy format version 9.0"});
  p = write("lenfield.npy", std::string("\x93NUMPY\x01\x00\x10", 9));
  expectError(probeNpy(p), p, {"ends inside its header length"});
  p = write("bighdr.npy", std::string("\x93NUMPY\x02\x00", 8) + le(0x7FFFFFFF, 4));
  expectError(probeNpy(p), p, {"header length is 2147483647 bytes", "1 MiB"});
  p = write("cuthdr.npy", npy(1, dict("<f4", "False", "(1,)"), 0).substr(0, 40));
  expectError(probeNpy(p), p, {".npy header is 118 bytes but the file ends after 40"});
  p = write("garbage.npy", npy(1, "{'descr': '<f4', 'shape': (1,", 4));
  expectError(probeNpy(p), p, {"not a Python dict literal", "at byte"});
  p = write("list.npy", npy(1, "[1, 2]", 4));
  expectError(probeNpy(p), p, {"not a Python dict literal"});
  p = write("nokey.npy", npy(1, "{'descr': '<f4', 'fortran_order': False}", 4));
  expectError(probeNpy(p), p, {"lacks 'shape'"});
  p = write("struct.npy", npy(1, "{'descr': [('x', '<f4')], 'fortran_order': False, 'shape': (1,)}", 4));
  expectError(probeNpy(p), p, {"structured dtype"});
  p = write("be.npy", npy(1, dict(">f4", "False", "(1,)"), 4));
  expectError(probeNpy(p), p, {"big-endian", "'>f4'"});
  p = write("c8.npy", npy(1, dict("<c8", "False", "(1,)"), 8));
  expectError(probeNpy(p), p, {"unsupported dtype ('<c8'"});
  p = write("fortran.npy", npy(1, dict("<f4", "True", "(2, 3)"), 24));
  expectError(probeNpy(p), p, {"Fortran (column-major) order", "np.ascontiguousarray"});
  p = write("fortstr.npy", npy(1, dict("<f4", "'no'", "(2, 3)"), 24));
  expectError(probeNpy(p), p, {"'fortran_order' is not True or False"});
  p = write("scalar.npy", npy(1, dict("<f4", "False", "()"), 4));
  expectError(probeNpy(p), p, {"single scalar", "sample axis"});
  p = write("negshape.npy", npy(1, dict("<f4", "False", "(-1, 3)"), 4));
  expectError(probeNpy(p), p, {"non-negative integers"});
  p = write("strshape.npy", npy(1, dict("<f4", "False", "'big'"), 4));
  expectError(probeNpy(p), p, {"'shape' is not a tuple"});
  p = write("data.npy", npy(1, dict("<f4", "False", "(60000, 784)"), 1000 - 128));
  expectError(probeNpy(p), p,
              {"file is 1000 bytes but the header describes 60000×784 f32 (188160000 bytes of data after a "
               "128-byte header, 188160128 in all)"});
  p = write("long.npy", npy(1, dict("<f4", "False", "(2,)"), 9));
  expectError(probeNpy(p), p, {"file is 137 bytes", "(8 bytes of data"});
  p = write("overflow.npy", npy(1, dict("<f8", "False", "(4294967296, 4294967296)"), 0));
  expectError(probeNpy(p), p, {"more than 2^63 bytes"});
  p = write("zero.npy", npy(1, dict("<f4", "False", "(0, 3)"), 0));
  expectError(probeNpy(p), p, {"no samples"});
  p = write("empty.npy", npy(1, dict("<f4", "False", "(3, 2, 0)"), 0));
  expectError(probeNpy(p), p, {"holds no values (3×2×0: each of its 3 samples is empty)"});
}

// ---------------------------------------------------------------- safetensors

TEST_F(Probe, SafetensorsOk) {
  std::string json = R"({"__metadata__":{"format":"pt"},"w":{"dtype":"F32","shape":[4,2,3],"data_offsets":[0,96]},)"
                     R"("b\u00e9":{"dtype":"BF16","shape":[5],"data_offsets":[96,106]}})";
  std::string p = write("m.safetensors", safetensors(json, 106));
  expectInfo(probeSafetensors(p, "w"), 4, {2, 3}, "f32", ElemKind::Float);
  expectInfo(probeSafetensors(p, "b\xc3\xa9"), 5, {}, "bf16", ElemKind::Float);
  // The spec allows the header to be padded with spaces.
  p = write("pad.safetensors", safetensors(R"({"t":{"dtype":"I64","shape":[2],"data_offsets":[0,16]}}    )", 16));
  expectInfo(probeSafetensors(p, "t"), 2, {}, "i64", ElemKind::Int);
  p = writeGz("m.safetensors.gz", safetensors(json, 106));
  expectInfo(probeSafetensors(p, "w"), 4, {2, 3}, "f32", ElemKind::Float);
}

TEST_F(Probe, SafetensorsErrors) {
  auto tensor = [](const std::string& name, const std::string& body) { return "\"" + name + "\":{" + body + "}"; };
  std::string p = write("short.st", "abc");
  expectError(probeSafetensors(p, "w"), p, {"is 3 bytes", "8-byte header length"});
  p = write("huge.st", le(200ull << 20, 8) + "{}");
  expectError(probeSafetensors(p, "w"), p, {"header length is 209715200 bytes", "100 MiB"});
  p = write("long.st", le(50, 8) + "{}");
  expectError(probeSafetensors(p, "w"), p, {"header length is 50 bytes but the file is only 10 bytes"});
  p = writeGz("long.st.gz", le(50, 8) + "{}");
  expectError(probeSafetensors(p, "w"), p, {"header length is 50 bytes but the file ends after 10"});
  p = write("json.st", safetensors(R"({"w":{"dtype":"F32",)", 0));
  expectError(probeSafetensors(p, "w"), p, {"not valid JSON (at byte 20:"});
  p = write("deep.st", safetensors(std::string(5000, '[') + std::string(5000, ']'), 0));
  expectError(probeSafetensors(p, "w"), p, {"nested deeper than 64 levels"});
  p = write("dup.st", safetensors(R"({"w":{},"w":{}})", 0));
  expectError(probeSafetensors(p, "w"), p, {"duplicate key"});
  p = write("arr.st", safetensors("[1,2]", 0));
  expectError(probeSafetensors(p, "w"), p, {"not a JSON object"});
  std::string many = "{\"__metadata__\":{}";
  for (int k = 0; k < 8; ++k)
    many += "," + tensor("t" + std::to_string(k), R"("dtype":"U8","shape":[1],"data_offsets":[0,1])");
  p = write("many.st", safetensors(many + "}", 1));
  expectError(probeSafetensors(p, "w"), p,
              {"no tensor named 'w' (available: 't0', 't1', 't2', 't3', 't4', and 3 more)"});
  expectError(probeSafetensors(p, "__metadata__"), p, {"no tensor named '__metadata__'"});
  p = write("none.st", safetensors(R"({"__metadata__":{}})", 0));
  expectError(probeSafetensors(p, "w"), p, {"the file holds no tensors"});
  auto one = [&](const std::string& name, const std::string& body, size_t data) {
    return write(name, safetensors("{" + tensor("w", body) + "}", data));
  };
  p = one("fields.st", R"("dtype":"F32","shape":[1])", 4);
  expectError(probeSafetensors(p, "w"), p, {"tensor 'w' lacks"});
  p = one("dtype.st", R"("dtype":"C64","shape":[1],"data_offsets":[0,8])", 8);
  expectError(probeSafetensors(p, "w"), p, {"unsupported dtype 'C64'"});
  p = one("shape.st", R"("dtype":"F32","shape":[1.5],"data_offsets":[0,4])", 4);
  expectError(probeSafetensors(p, "w"), p, {"non-negative integers"});
  p = one("offs.st", R"("dtype":"F32","shape":[1],"data_offsets":[4,0])", 4);
  expectError(probeSafetensors(p, "w"), p, {"bad 'data_offsets'"});
  p = one("mismatch.st", R"("dtype":"F32","shape":[5,6],"data_offsets":[0,100])", 100);
  expectError(probeSafetensors(p, "w"), p,
              {"tensor 'w' has data_offsets [0, 100] (100 bytes) but shape [5×6] F32 needs 120 bytes"});
  p = one("beyond.st", R"("dtype":"F32","shape":[4],"data_offsets":[0,16])", 10);
  expectError(probeSafetensors(p, "w"), p,
              {"tensor 'w' ends at byte 79 (the data starts after the 63-byte header) but the file is 73 bytes"});
  p = one("overflow.st", R"("dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,8])", 8);
  expectError(probeSafetensors(p, "w"), p, {"more than 2^63 bytes"});
  p = one("bigint.st", R"("dtype":"F64","shape":[99999999999999999999],"data_offsets":[0,8])", 8);
  expectError(probeSafetensors(p, "w"), p, {"non-negative integers"});
  p = one("scalar.st", R"("dtype":"F32","shape":[],"data_offsets":[0,4])", 4);
  expectError(probeSafetensors(p, "w"), p, {"single scalar"});
}

TEST(Literal, JsonAndPython) {
  Literal v;
  std::string err;
  ASSERT_TRUE(parseLiteral(R"( {"a": [1, -2.5e3, true, null, "x\"\n\ud83d\ude00"]} )", Syntax::Json, v, err)) << err;
  ASSERT_EQ(v.get("a")->items.size(), 5u);
  EXPECT_EQ(v.get("a")->items[0].i, 1);
  EXPECT_DOUBLE_EQ(v.get("a")->items[1].f, -2500.0);
  EXPECT_EQ(v.get("a")->items[4].s, "x\"\n\xF0\x9F\x98\x80");
  // Out of range saturates as strtod does: too large is ±inf, too small is ±0.
  ASSERT_TRUE(parseLiteral("[1e999, -1e999, 1e-999, -2e-400]", Syntax::Json, v, err)) << err;
  EXPECT_EQ(v.items[0].f, HUGE_VAL);
  EXPECT_EQ(v.items[1].f, -HUGE_VAL);
  EXPECT_EQ(v.items[2].f, 0.0);
  EXPECT_EQ(v.items[3].f, 0.0);
  EXPECT_TRUE(std::signbit(v.items[3].f));
  EXPECT_FALSE(parseLiteral("[1,]", Syntax::Json, v, err));  // JSON has no trailing commas
  EXPECT_FALSE(parseLiteral("{'a': 1}", Syntax::Json, v, err));
  EXPECT_FALSE(parseLiteral("\"\\ud800\"", Syntax::Json, v, err));
  EXPECT_FALSE(parseLiteral("01x", Syntax::Json, v, err));
  EXPECT_FALSE(parseLiteral("", Syntax::Json, v, err));
  ASSERT_TRUE(parseLiteral("{'s': (1, 2,), 'b': True, 'n': None,}", Syntax::Python, v, err)) << err;
  EXPECT_EQ(v.get("s")->items.size(), 2u);
  LiteralLimits tight;
  tight.max_values = 10;
  EXPECT_FALSE(parseLiteral("[1,1,1,1,1,1,1,1,1,1,1,1]", Syntax::Json, v, err, tight));
  EXPECT_NE(err.find("more than 10 values"), std::string::npos) << err;
}

// ---------------------------------------------------------------- csv

TEST_F(Probe, CsvShapes) {
  std::string p = write("a.csv", "x,y,z\n1,2,3\n4.5,-6e-1,+7\n\n  8 , 9 ,10\n");
  expectInfo(probeCsv(p, {}), 3, {3}, "f32", ElemKind::Float);
  CsvOptions two;
  two.columns = {2, 0};
  expectInfo(probeCsv(p, two), 3, {2}, "f32", ElemKind::Float);
  CsvOptions one;
  one.columns = {1};
  expectInfo(probeCsv(p, one), 3, {}, "f32", ElemKind::Float);
  p = writeGz("b.csv.gz", "\"a\",\"b\"\r\n\"1\",2\r\n3,4");  // CRLF, quotes, no final newline
  expectInfo(probeCsv(p, {}), 2, {2}, "f32", ElemKind::Float);
  CsvOptions ws;
  ws.header = false;
  ws.delimiter = ' ';
  p = write("ws.txt", "1 2\t3\n  4  5 6  \n");
  expectInfo(probeCsv(p, ws), 2, {3}, "f32", ElemKind::Float);
  ws.delimiter = ',';  // a file without commas is read as whitespace-separated
  expectInfo(probeCsv(p, ws), 2, {3}, "f32", ElemKind::Float);
  CsvOptions skip;
  skip.skip = 2;
  p = write("meta.csv", "# made by hand\n3,2,,\nA,B\n1,2\n3,4\n");
  expectInfo(probeCsv(p, skip), 2, {2}, "f32", ElemKind::Float);
  CsvOptions semi;
  semi.delimiter = ';';
  expectInfo(probeCsv(write("semi.csv",
                            "\xEF\xBB\xBF"
                            "a;b\n1;2\n"),
                      semi),
             1, {2}, "f32", ElemKind::Float);
  // Many rows cross the reader's buffer boundaries, plain and compressed.
  std::string big = "a,b\n";
  for (int k = 0; k < 50000; ++k) big += std::to_string(k) + "," + std::to_string(k * 0.5) + "\n";
  expectInfo(probeCsv(write("big.csv", big), {}), 50000, {2}, "f32", ElemKind::Float);
  expectInfo(probeCsv(writeGz("big.csv.gz", big), {}), 50000, {2}, "f32", ElemKind::Float);
}

TEST_F(Probe, CsvErrors) {
  std::string p = write("bad.csv", "a,b,c\n1,2,3\n4,x5,6\n");
  expectError(probeCsv(p, {}), p + ":3:", {"column 1 is 'x5', which is not a number"});
  p = write("empty_cell.csv", "a,b\n1,\n");
  expectError(probeCsv(p, {}), p + ":2:", {"column 1 is '', which is not a number"});
  p = write("ragged.csv", "a,b,c\n1,2,3\n\n4,5\n");
  expectError(probeCsv(p, {}), p + ":4:", {"row has 2 columns but the first data row (line 2) has 3"});
  CsvOptions sel;
  sel.columns = {0, 7};
  p = write("narrow.csv", "a,b,c\n1,2,3\n");
  expectError(probeCsv(p, sel), p + ":2:", {"row has 3 columns but column 7 is selected"});
  sel.columns = {-1};
  expectError(probeCsv(p, sel), p, {"column -1 is negative"});
  CsvOptions neg;
  neg.skip = -2;
  expectError(probeCsv(p, neg), p, {"skip = -2 is negative"});
  CsvOptions quote;
  quote.delimiter = '"';
  expectError(probeCsv(p, quote), p, {"cannot separate cells"});
  p = write("header_only.csv", "a,b\n\n");
  expectError(probeCsv(p, {}), p, {"has no data rows after a header line (the file has 2 lines)"});
  CsvOptions skip3;
  skip3.skip = 3;
  skip3.header = false;
  expectError(probeCsv(p, skip3), p, {"has no data rows after 3 skipped lines"});
  p = write("empty.csv", "");
  expectError(probeCsv(p, {}), p, {"has no data rows after a header line (the file is empty)"});
  p = write("binary.csv", std::string("a\n\x01\x02\xff\n", 6));
  expectError(probeCsv(p, {}), p + ":2:", {"'\\x01\\x02\\xff'"});
  p = write("longline.csv", "a\n" + std::string((16 << 20) + 10, '1'));
  expectError(probeCsv(p, {}), p, {"line 2 is longer than 16 MiB"});
}

// ---------------------------------------------------------------- text and tokens

TEST_F(Probe, TextWindows) {
  std::string p = write("t.txt", std::string(65, 'a'));
  expectInfo(probeText(p, 64), 1, {64}, "i32", ElemKind::Int);
  expectInfo(probeText(p, 8), 8, {8}, "i32", ElemKind::Int);    // (65 - 1) / 8
  expectInfo(probeText(p, 10), 6, {10}, "i32", ElemKind::Int);  // partial last window dropped
  expectInfo(probeText(writeGz("t.txt.gz", std::string(1001, 'b')), 100), 10, {100}, "i32", ElemKind::Int);
  expectError(probeText(p, 65), p,
              {"text(seq = 65) needs at least 66 bytes (seq + 1, one window) but the file holds 65"});
  expectError(probeText(p, 0), p, {"needs seq >= 1"});
  expectError(probeText(p, INT64_MAX), p, {"at least 9223372036854775808 bytes"});
  std::string e = write("e.txt", "");
  expectError(probeText(e, 1), e, {"holds 0"});
}

TEST_F(Probe, TokenWindows) {
  std::string p = write("tok.bin", std::string(2 * 33, '\0'));
  expectInfo(probeTokens(p, "u16", 8), 4, {8}, "i32", ElemKind::Int);
  expectInfo(probeTokens(p, "u16", 32), 1, {32}, "i32", ElemKind::Int);
  expectError(probeTokens(p, "u16", 33), p,
              {"needs at least 34 u16 tokens (seq + 1, one window) but the file holds 33"});
  std::string q = write("tok32.bin", std::string(4 * 17, '\0'));
  expectInfo(probeTokens(q, "u32", 4), 4, {4}, "i32", ElemKind::Int);
  expectInfo(probeTokens(q, "i32", 16), 1, {16}, "i32", ElemKind::Int);
  expectError(probeTokens(p, "u32", 4), p, {"file is 66 bytes, not a whole number of u32 tokens (4 bytes each)"});
  expectError(probeTokens(p, "u8", 4), p, {"unsupported dtype (expected u16, u32 or i32)"});
  expectError(probeTokens(p, "u16", -1), p, {"needs seq >= 1"});
  // A first token of 35615 is stored as 1f 8b, the gzip magic: still plain data.
  std::string magic = write("magic.bin", std::string("\x1f\x8b\x08\x00", 4) + std::string(12, '\0'));
  expectInfo(probeTokens(magic, "u16", 7), 1, {7}, "i32", ElemKind::Int);
  expectInfo(probeTokens(writeGz("tok.bin.gz", std::string(4 * 9, '\0')), "i32", 4), 2, {4}, "i32", ElemKind::Int);
}

// ---------------------------------------------------------------- real files, when installed

TEST(RealFiles, Datasets) {
  const std::string mnist = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz";
  const std::string sk = "/usr/lib/python3/dist-packages/sklearn/datasets/data/";
  const std::string gpl = "/usr/share/common-licenses/GPL-3";
  if (!fs::exists(mnist) || !fs::exists(sk + "boston_house_prices.csv") || !fs::exists(gpl))
    GTEST_SKIP() << "datasets not installed";
  expectInfo(probeIdx(mnist), 60000, {28, 28}, "u8", ElemKind::Int);
  CsvOptions diabetes;
  diabetes.header = false;
  diabetes.delimiter = ' ';
  expectInfo(probeCsv(sk + "diabetes_data_raw.csv.gz", diabetes), 442, {10}, "f32", ElemKind::Float);
  CsvOptions boston;
  boston.skip = 1;
  expectInfo(probeCsv(sk + "boston_house_prices.csv", boston), 506, {14}, "f32", ElemKind::Float);
  boston.columns = {13};
  expectInfo(probeCsv(sk + "boston_house_prices.csv", boston), 506, {}, "f32", ElemKind::Float);
  // Without skip the metadata line is taken as the header and the real header fails to parse.
  expectError(probeCsv(sk + "boston_house_prices.csv", {}), sk + "boston_house_prices.csv:2:", {"'\"CRIM\"'"});
  int64_t bytes = static_cast<int64_t>(fs::file_size(gpl));
  expectInfo(probeText(gpl, 64), (bytes - 1) / 64, {64}, "i32", ElemKind::Int);
  expectError(probeIdx(gpl), gpl, {"not an IDX file"});
  expectError(probeNpy(gpl), gpl, {"not a .npy file"});
  expectError(probeSafetensors(gpl, "w"), gpl, {"100 MiB"});
}

// ---------------------------------------------------------------- robustness

// Every prefix and many random corruptions of valid files, through every
// probe: results may be anything, but nothing may crash, throw or hang.
TEST_F(Probe, TruncationAndCorruptionNeverCrash) {
  std::vector<std::string> seeds = {
      idx(0x0D, {3, 2, 2}, 48),
      npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }", 48),
      safetensors(R"({"__metadata__":{"a":"b"},"w":{"dtype":"F32","shape":[3,4],"data_offsets":[0,48]}})", 48),
      "a,b\n1,2\n3,4\n",
  };
  for (size_t k = 0, n = seeds.size(); k < n; ++k) seeds.push_back(gzBytes(seeds[k]));
  std::mt19937 rng(1234);
  int64_t oks = 0;
  auto all = [&](const std::string& path) {
    oks += probeIdx(path).ok + probeNpy(path).ok + probeSafetensors(path, "w").ok + probeCsv(path, {}).ok +
           probeText(path, 3).ok + probeTokens(path, "u16", 3).ok;
  };
  for (size_t s = 0; s < seeds.size(); ++s) {
    const std::string& seed = seeds[s];
    for (size_t len = 0; len <= seed.size(); ++len) all(write("cut", seed.substr(0, len)));
    for (int trial = 0; trial < 200; ++trial) {
      std::string m = seed;
      int flips = 1 + static_cast<int>(rng() % 4);
      for (int f = 0; f < flips; ++f) m[rng() % m.size()] = static_cast<char>(rng());
      all(write("flip", m));
    }
  }
  for (int trial = 0; trial < 200; ++trial) {
    std::string junk(rng() % 300, '\0');
    for (char& c : junk) c = static_cast<char>(rng());
    all(write("junk", junk));
  }
  EXPECT_GT(oks, 0);  // the uncorrupted seeds themselves must still probe fine
}

}  // namespace
