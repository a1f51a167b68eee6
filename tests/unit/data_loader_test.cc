// Tests for runtime/data/loader.h: every source on tiny files written into a
// temp dir (values checked element by element), the real datasets when
// installed, every error, synthetic data and its teacher, and the Loader's
// order, sharding across world sizes 1–4, drop_last, resume and prefetching.
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "runtime/data/loader.h"
#include "tests/unit/scratch_dir.h"

namespace fs = std::filesystem;
using namespace dtl::rt::data;

namespace {

class Loading : public dtl::testing::ScratchDirTest {};

// ---------------------------------------------------------------- file builders

template <class T>
std::string bytesOf(std::initializer_list<T> values, bool big_endian = false) {
  std::string s;
  for (T v : values) {
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    if (big_endian) std::reverse(b, b + sizeof(T));
    s.append(b, sizeof(T));
  }
  return s;
}

std::string le(uint64_t v, int n) {
  std::string s;
  for (int k = 0; k < n; ++k) s += static_cast<char>(v >> (8 * k));
  return s;
}

std::string idx(unsigned char type, const std::vector<uint32_t>& dims, const std::string& data) {
  std::string s{'\0', '\0', static_cast<char>(type), static_cast<char>(dims.size())};
  for (uint32_t d : dims)
    s += {static_cast<char>(d >> 24), static_cast<char>(d >> 16), static_cast<char>(d >> 8), static_cast<char>(d)};
  return s + data;
}

std::string npy(const std::string& descr, const std::string& shape, const std::string& data, int major = 1) {
  std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  int len_bytes = major == 1 ? 2 : 4;
  while ((8 + len_bytes + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  return std::string("\x93NUMPY", 6) + static_cast<char>(major) + '\0' + le(header.size(), len_bytes) + header + data;
}

std::string safetensors(const std::string& json, const std::string& data) { return le(json.size(), 8) + json + data; }

FieldSpec spec(const std::string& name, const std::string& source, const std::string& path,
               std::vector<int64_t> dims = {}, bool integer = false) {
  FieldSpec f;
  f.name = name;
  f.source = source;
  f.path = path;
  f.sample_dims = std::move(dims);
  f.integer = integer;
  return f;
}

Dataset openOk(const std::vector<FieldSpec>& fields) {
  Dataset ds;
  Status s = Dataset::open(fields, ds);
  EXPECT_TRUE(s.ok) << s.message;
  return ds;
}

// The error must name every part (the field, the file, what is wrong).
void expectError(const std::vector<FieldSpec>& fields, std::initializer_list<std::string> parts) {
  Dataset ds;
  Status s = Dataset::open(fields, ds);
  ASSERT_FALSE(s.ok) << "expected an error";
  for (const auto& p : parts)
    EXPECT_NE(s.message.find(p), std::string::npos) << "missing '" << p << "' in: " << s.message;
}

std::vector<float> floats(const Dataset& ds, int64_t i, const std::string& name) {
  Batch b;
  ds.copySample(i, b, 0);
  return b.floats[name];
}
std::vector<int32_t> ints(const Dataset& ds, int64_t i, const std::string& name) {
  Batch b;
  ds.copySample(i, b, 0);
  return b.ints[name];
}

using F = std::vector<float>;
using I = std::vector<int32_t>;

// ---------------------------------------------------------------- idx

TEST_F(Loading, IdxEveryTypePlainAndGzip) {
  std::string u8 = idx(0x08, {3, 2, 2}, bytesOf<uint8_t>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 255}));
  for (const std::string& p : {write("u8.idx", u8), writeGz("u8.idx.gz", u8)}) {
    Dataset ds = openOk({spec("x", "idx", p, {4})});
    EXPECT_EQ(ds.samples(), 3);
    EXPECT_EQ(floats(ds, 0, "x"), (F{0, 1, 2, 3}));
    EXPECT_EQ(floats(ds, 2, "x"), (F{8, 9, 10, 255}));
  }
  Dataset i8 = openOk({spec("x", "idx", write("i8", idx(0x09, {2}, bytesOf<int8_t>({-128, 7}))))});
  EXPECT_EQ(floats(i8, 0, "x"), F{-128});
  auto be = [](auto... v) { return bytesOf({v...}, true); };
  Dataset i16 = openOk({spec("x", "idx", write("i16", idx(0x0B, {1, 2}, be(int16_t{-300}, int16_t{1000}))), {2})});
  EXPECT_EQ(floats(i16, 0, "x"), (F{-300, 1000}));
  Dataset i32 = openOk({spec("y", "idx", write("i32", idx(0x0C, {2}, be(int32_t{70000}, int32_t{3}))), {}, true)});
  EXPECT_EQ(ints(i32, 0, "y"), I{70000});
  EXPECT_EQ(ints(i32, 1, "y"), I{3});
  Dataset f32 = openOk({spec("x", "idx", write("f32", idx(0x0D, {1, 2}, be(1.5f, -2.25f))), {2})});
  EXPECT_EQ(floats(f32, 0, "x"), (F{1.5f, -2.25f}));
  Dataset f64 = openOk({spec("x", "idx", writeGz("f64.gz", idx(0x0E, {2}, be(0.1, -3.0)) + "trailing"))});
  EXPECT_EQ(floats(f64, 0, "x"), F{0.1f});
  EXPECT_EQ(floats(f64, 1, "x"), F{-3.0f});
}

// `dtlc run` keeps what a gzip file's probe inflated and the loader adopts
// it (probe.h, keepInflatedData): the same values as a fresh read, the
// big-endian types swapped, an IDX file's trailing bytes left out, npy too;
// once adopted the probes' memory lets it go; a file changed since its probe
// is read again.
TEST_F(Loading, AdoptsWhatTheProbeInflated) {
  auto be = [](auto... v) { return bytesOf({v...}, true); };
  const std::string f32 = idx(0x0D, {3, 2}, be(1.5f, -2.25f, 0.0f, 7.0f, -1.0f, 3.0f)) + "trailing";
  const std::string u8 = idx(0x08, {3, 2}, bytesOf<uint8_t>({0, 1, 2, 3, 4, 255}));
  const std::string n32 = npy("<i4", "(3,)", bytesOf<int32_t>({9, 0, 70000}));
  auto fields = [&](const std::string& tag) {
    return std::vector<FieldSpec>{spec("x", "idx", writeGz(tag + "f32.gz", f32), {2}),
                                  spec("b", "idx", writeGz(tag + "u8.gz", u8), {2}),
                                  spec("y", "npy", writeGz(tag + "n32.npy.gz", n32), {}, true)};
  };
  Dataset fresh = openOk(fields("fresh"));
  KeepInflatedData keep;
  const std::vector<FieldSpec> kept_fields = fields("kept");
  const ProbeResult probed = probeIdx(kept_fields[0].path);
  ASSERT_TRUE(probed.ok) << probed.error;
  ASSERT_TRUE(probed.inflated) << "the probe kept the data";
  EXPECT_EQ(probed.inflated->size(), 24u) << "the data the header describes, not the trailing bytes";
  Dataset kept = openOk(kept_fields);
  EXPECT_FALSE(probeIdx(kept_fields[0].path).inflated) << "adopted, then forgotten";
  EXPECT_FALSE(probeIdx(kept_fields[1].path).inflated) << "adopted, then forgotten";
  EXPECT_FALSE(probeNpy(kept_fields[2].path).inflated) << "adopted, then forgotten";
  for (int64_t i = 0; i < 3; ++i) {
    EXPECT_EQ(floats(kept, i, "x"), floats(fresh, i, "x")) << i;
    EXPECT_EQ(floats(kept, i, "b"), floats(fresh, i, "b")) << i;
    EXPECT_EQ(ints(kept, i, "y"), ints(fresh, i, "y")) << i;
  }
  EXPECT_EQ(floats(kept, 2, "x"), (F{-1.0f, 3.0f}));
  EXPECT_EQ(ints(kept, 2, "y"), I{70000});
  // Probed (and kept), then rewritten before the loader reads it.
  const std::string path = writeGz("changed.gz", u8);
  ASSERT_TRUE(probeIdx(path).inflated);
  writeGz("changed.gz", idx(0x08, {3, 2}, bytesOf<uint8_t>({10, 11, 12, 13, 14, 15})));
  Dataset changed = openOk({spec("b", "idx", path, {2})});
  EXPECT_EQ(floats(changed, 0, "b"), (F{10, 11}));
  const std::string unread = writeGz("unread.gz", u8);
  ASSERT_TRUE(probeIdx(unread).inflated);
  keepInflatedData(false);
  EXPECT_FALSE(probeIdx(unread).inflated) << "off: what no loader adopted is let go";
  EXPECT_FALSE(probeIdx(writeGz("off.gz", u8)).inflated) << "off: nothing kept";
}

TEST_F(Loading, TransformsApplyInOrderInDouble) {
  std::string p = write("t.idx", idx(0x08, {2}, bytesOf<uint8_t>({51, 255})));
  FieldSpec f = spec("x", "idx", p);
  f.transforms = {{'/', 255}};
  Dataset ds = openOk({f});
  EXPECT_EQ(floats(ds, 0, "x"), F{static_cast<float>(51.0 / 255)});
  EXPECT_EQ(floats(ds, 1, "x"), F{1.0f});
  f.transforms = {{'-', 1}, {'*', 2}, {'+', 0.5}};
  EXPECT_EQ(floats(openOk({f}), 0, "x"), F{100.5f});
  f.transforms = {{'*', 2}, {'-', 1}};
  EXPECT_EQ(floats(openOk({f}), 0, "x"), F{101.0f});
}

// One-byte elements are looked up in a table of their 256 values after the
// transforms: every byte, u8 and i8, gives the bits the
// element-by-element double arithmetic gives.
TEST_F(Loading, EveryByteValueAsTheTransformsComputeIt) {
  std::string all(256, '\0');
  for (int b = 0; b < 256; ++b) all[static_cast<size_t>(b)] = static_cast<char>(b);
  const std::vector<Transform> chain = {{'/', 255}, {'-', 0.1307}, {'/', 0.3081}};
  for (int type : {0x08, 0x09}) {
    FieldSpec f = spec("x", "idx", write("bytes.idx", idx(type, {4, 64}, all)), {64});
    f.transforms = chain;
    Dataset ds = openOk({f});
    for (int64_t i = 0; i < 4; ++i) {
      const F got = floats(ds, i, "x");
      for (int64_t j = 0; j < 64; ++j) {
        const int b = static_cast<int>(i * 64 + j);
        const double v = type == 0x08 ? b : static_cast<int8_t>(b);
        const float want = static_cast<float>(((v / 255) - 0.1307) / 0.3081);
        ASSERT_EQ(std::memcmp(&got[static_cast<size_t>(j)], &want, 4), 0) << "byte " << b << " of type " << type;
      }
    }
  }
}

// ---------------------------------------------------------------- npy

TEST_F(Loading, NpyDtypes) {
  auto one = [&](const std::string& descr, const std::string& data, const std::string& shape = "(4,)") {
    return openOk({spec("x", "npy",
                        write("a" + std::to_string(data.size()) + descr.substr(1) + ".npy", npy(descr, shape, data)))});
  };
  auto all = [](const Dataset& ds) {
    F out;
    for (int64_t i = 0; i < ds.samples(); ++i) out.push_back(floats(ds, i, "x")[0]);
    return out;
  };
  EXPECT_EQ(all(one("<f4", bytesOf<float>({1.5f, -2, 0, 3}))), (F{1.5f, -2, 0, 3}));
  EXPECT_EQ(all(one("<f8", bytesOf<double>({1e-3, -2, 0, 1e30}))), (F{1e-3f, -2, 0, 1e30f}));
  // f16 exactly: 1, -2, the smallest subnormal 2^-24, the largest finite 65504.
  EXPECT_EQ(all(one("<f2", bytesOf<uint16_t>({0x3c00, 0xc000, 0x0001, 0x7bff}))),
            (F{1, -2, std::ldexp(1.0f, -24), 65504}));
  EXPECT_EQ(all(one("<i4", bytesOf<int32_t>({-5, 0, 7, 1 << 24}))), (F{-5, 0, 7, 16777216}));
  EXPECT_EQ(all(one("<i8", bytesOf<int64_t>({-5, 0, 7, int64_t{1} << 40}))), (F{-5, 0, 7, 1099511627776.0f}));
  EXPECT_EQ(all(one("<i2", bytesOf<int16_t>({-300, 0, 7, 9}))), (F{-300, 0, 7, 9}));
  EXPECT_EQ(all(one("|i1", bytesOf<int8_t>({-1, 0, 7, 9}))), (F{-1, 0, 7, 9}));
  EXPECT_EQ(all(one("|u1", bytesOf<uint8_t>({255, 0, 7, 9}))), (F{255, 0, 7, 9}));
  EXPECT_EQ(all(one("<u2", bytesOf<uint16_t>({65535, 0, 7, 9}))), (F{65535, 0, 7, 9}));
  EXPECT_EQ(all(one("<u4", bytesOf<uint32_t>({4000000000u, 0, 7, 9}))), (F{4e9f, 0, 7, 9}));
  // Version 2 header, 2-d samples, gzip.
  std::string v2 = npy("<f4", "(2, 2, 3)", bytesOf<float>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}), 2);
  Dataset ds = openOk({spec("x", "npy", writeGz("v2.npy.gz", v2), {3, 2})});
  EXPECT_EQ(floats(ds, 1, "x"), (F{6, 7, 8, 9, 10, 11}));
  // Integer input from integral floats is fine.
  Dataset lab = openOk({spec("y", "npy", write("lab.npy", npy("<f4", "(2,)", bytesOf<float>({3, 0}))), {}, true)});
  EXPECT_EQ(ints(lab, 0, "y"), I{3});
}

// An f32 field without transforms is copied as stored, an i32 one too: every
// bit as the trip through double gave (-0, subnormals, the extremes), sample
// by sample at the array's stride; with a transform it is computed in double.
TEST_F(Loading, NpyF32AndI32SamplesKeepEveryBit) {
  const std::vector<float> xs = {-0.0f, std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::max(),
                                 -std::numeric_limits<float>::min(), 0.1f, -3.5f};
  const std::string raw(reinterpret_cast<const char*>(xs.data()), xs.size() * sizeof(float));
  const std::string x = write("bits.npy", npy("<f4", "(3, 2)", raw));
  const std::string y = write("bits_y.npy", npy("<i4", "(3,)", bytesOf<int32_t>({7, 0, 1 << 30})));
  Dataset ds = openOk({spec("x", "npy", x, {2}), spec("y", "npy", y, {}, true)});
  for (int64_t i = 0; i < 3; ++i) {
    const F got = floats(ds, i, "x");
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(std::memcmp(got.data(), xs.data() + 2 * i, 2 * sizeof(float)), 0) << "sample " << i;
  }
  EXPECT_EQ(ints(ds, 2, "y"), I{1 << 30});
  EXPECT_EQ(ints(ds, 0, "y"), I{7});
  FieldSpec halved = spec("x", "npy", x, {2});
  halved.transforms = {{'/', 2.0}};
  Dataset h = openOk({halved});
  EXPECT_EQ(floats(h, 2, "x"), (F{0.05f, -1.75f}));
  EXPECT_TRUE(std::signbit(floats(h, 0, "x")[0])) << "-0 / 2 is -0";
}

// ---------------------------------------------------------------- safetensors

TEST_F(Loading, SafetensorsDtypes) {
  std::string data, json = "{\"__metadata__\":{\"format\":\"pt\"}";
  auto add = [&](const std::string& key, const std::string& dtype, const std::string& shape, const std::string& bytes) {
    json += ",\"" + key + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape + ",\"data_offsets\":[" +
            std::to_string(data.size()) + "," + std::to_string(data.size() + bytes.size()) + "]}";
    data += bytes;
  };
  add("f32", "F32", "[2,2]", bytesOf<float>({1, 2, 3, 4}));
  add("f64", "F64", "[2]", bytesOf<double>({0.25, -8}));
  add("i32", "I32", "[2]", bytesOf<int32_t>({9, 0}));
  add("i64", "I64", "[2]", bytesOf<int64_t>({1, 1ll << 31}));
  std::string p = write("m.safetensors", safetensors(json + "}", data));
  auto load = [&](const std::string& key, std::vector<int64_t> dims = {}, bool integer = false) {
    FieldSpec f = spec("x", "safetensors", p, std::move(dims), integer);
    f.key = key;
    return openOk({f});
  };
  EXPECT_EQ(floats(load("f32", {2}), 1, "x"), (F{3, 4}));
  EXPECT_EQ(floats(load("f64"), 0, "x"), F{0.25f});
  EXPECT_EQ(ints(load("i32", {}, true), 0, "x"), I{9});
  FieldSpec big = spec("x", "safetensors", p, {}, true);
  big.key = "i64";
  expectError({big}, {"field 'x': " + p + ": sample 1 is 2147483648, which is too large"});
}

TEST_F(Loading, SafetensorsConvertsExactly) {
  std::string data, json = "{";
  auto add = [&](const std::string& key, const std::string& dtype, const std::string& shape, const std::string& bytes) {
    json += std::string(json.size() > 1 ? "," : "") + "\"" + key + "\":{\"dtype\":\"" + dtype +
            "\",\"shape\":" + shape + ",\"data_offsets\":[" + std::to_string(data.size()) + "," +
            std::to_string(data.size() + bytes.size()) + "]}";
    data += bytes;
  };
  add("u8", "U8", "[2]", bytesOf<uint8_t>({200, 1}));
  add("u16", "U16", "[2]", bytesOf<uint16_t>({60000, 1}));
  add("bf16", "BF16", "[2,2]", bytesOf<uint16_t>({0x3f80, 0xc0a0, 0x3f81, 0x0001}));
  add("f16", "F16", "[2]", bytesOf<uint16_t>({0x3555, 0xc000}));
  add("e4m3", "F8_E4M3", "[3]", bytesOf<uint8_t>({0x38, 0x01, 0x7e}));
  add("e5m2", "F8_E5M2", "[2]", bytesOf<uint8_t>({0x3c, 0x40}));
  add("i64", "I64", "[2]", bytesOf<int64_t>({1, 1ll << 31}));
  std::string p = writeGz("m.safetensors.gz", safetensors(json + "}", data));
  auto load = [&](const std::string& key, std::vector<int64_t> dims = {}) {
    FieldSpec f = spec("x", "safetensors", p, std::move(dims));
    f.key = key;
    return openOk({f});
  };
  EXPECT_EQ(floats(load("u8"), 0, "x"), F{200});
  EXPECT_EQ(floats(load("u16"), 0, "x"), F{60000});
  Dataset bf = load("bf16", {2});
  EXPECT_EQ(floats(bf, 0, "x"), (F{1, -5}));
  EXPECT_EQ(floats(bf, 1, "x"), (F{1.0078125f, std::ldexp(1.0f, -133)}));
  Dataset h = load("f16");
  EXPECT_EQ(floats(h, 0, "x"), F{0.333251953125f});
  EXPECT_EQ(floats(h, 1, "x"), F{-2});
  Dataset e4 = load("e4m3");
  EXPECT_EQ(floats(e4, 0, "x"), F{1});
  EXPECT_EQ(floats(e4, 1, "x"), F{std::ldexp(1.0f, -9)});
  EXPECT_EQ(floats(e4, 2, "x"), F{448});
  EXPECT_EQ(floats(load("e5m2"), 1, "x"), F{2});
  EXPECT_EQ(floats(load("i64"), 1, "x"), F{2147483648.0f});
}

// ---------------------------------------------------------------- csv

TEST_F(Loading, CsvFollowsTheProbeRules) {
  std::string text = "\xEF\xBB\xBFmeta line\n\"a\",\"b\",\"c\"\n1,2,3\n\n \"4\" , +5 ,6e-1\r\n7,8,1e-999\n";
  for (const std::string& p : {write("a.csv", text), writeGz("a.csv.gz", text)}) {
    FieldSpec f = spec("x", "csv", p, {3});
    f.csv.skip = 1;
    Dataset ds = openOk({f});
    ASSERT_EQ(ds.samples(), 3);
    EXPECT_EQ(floats(ds, 0, "x"), (F{1, 2, 3}));
    EXPECT_EQ(floats(ds, 1, "x"), (F{4, 5, 0.6f}));
    EXPECT_EQ(floats(ds, 2, "x"), (F{7, 8, 0}));  // saturates like strtod
    f.csv.columns = {2, 0};  // in the order given
    f.sample_dims = {2};
    EXPECT_EQ(floats(openOk({f}), 1, "x"), (F{0.6f, 4}));
    FieldSpec label = spec("y", "csv", p, {}, true);
    label.csv.skip = 1;
    label.csv.columns = {1};
    EXPECT_EQ(ints(openOk({f, label}), 2, "y"), I{8});
  }
  // Whitespace-separated with the default ',' and no header; and ';'.
  FieldSpec ws = spec("x", "csv", write("ws.txt", "1 2\t3\n4   5 6\n"), {3});
  ws.csv.header = false;
  EXPECT_EQ(floats(openOk({ws}), 1, "x"), (F{4, 5, 6}));
  FieldSpec semi = spec("x", "csv", write("s.csv", "p;q\n1.5;-2\n"), {2});
  semi.csv.delimiter = ';';
  EXPECT_EQ(floats(openOk({semi}), 0, "x"), (F{1.5f, -2}));
}

// ---------------------------------------------------------------- non-finite values

// A NaN or ±inf a float input would be fed is refused at open, naming the file
// and the value's place: csv line and column (with its header title), the
// array formats' sample and element; also a finite value that overflows f32
// after the transforms. Integer inputs are range-checked separately.
TEST_F(Loading, NonFiniteValuesAreRefusedWithTheirPlace) {
  const std::string finite_only = "; input 'x' takes finite numbers only";
  std::string csv = write("n.csv", "age,height,weight\n1,2,3\n\n4,nan,6\n");
  expectError({spec("x", "csv", csv, {3})}, {"field 'x': " + csv + ":4: column 1 ('height') is nan" + finite_only});
  FieldSpec cols = spec("x", "csv", write("i.csv", "1 2 3\n4 5 -1e999\n"), {2});
  cols.csv.header = false;
  cols.csv.columns = {2, 0};
  expectError({cols}, {"i.csv:2: column 2 is -inf" + finite_only});

  std::string idx_nan = write("n.idx", idx(0x0D, {2, 2, 2}, bytesOf<float>({1, 2, 3, 4, 5, 6, NAN, 8}, true)));
  expectError({spec("x", "idx", idx_nan, {4})}, {"field 'x': " + idx_nan + ": sample 1, element (1, 0) is nan"});
  std::string npy_inf = write("n.npy", npy("<f8", "(3, 2)", bytesOf<double>({1, 2, 3, 4, 5, INFINITY})));
  expectError({spec("x", "npy", npy_inf, {2})}, {npy_inf + ": sample 2, element 1 is inf" + finite_only});
  std::string st_json = R"({"h":{"dtype":"F16","shape":[2],"data_offsets":[0,4]},)"
                        R"("e":{"dtype":"F8_E4M3","shape":[2],"data_offsets":[4,6]}})";
  std::string st = write("n.safetensors", safetensors(st_json, bytesOf<uint16_t>({0x3c00, 0xfc00}) + "\x38\x7f"));
  FieldSpec half = spec("x", "safetensors", st), e4m3 = half;
  half.key = "h";
  e4m3.key = "e";
  expectError({half}, {st + ": sample 1 is -inf"});
  expectError({e4m3}, {st + ": sample 1 is nan"});

  // Finite in the file, infinite as fed: f64 beyond f32's range, or after a transform.
  std::string big = write("big.npy", npy("<f8", "(2,)", bytesOf<double>({1, 1e300})));
  expectError({spec("x", "npy", big)}, {big + ": sample 1 is 1e+300, which becomes inf in f32" + finite_only});
  FieldSpec scaled = spec("x", "npy", write("s.npy", npy("<f4", "(2,)", bytesOf<float>({1, 3e38f}))));
  EXPECT_EQ(floats(openOk({scaled}), 1, "x"), F{3e38f});
  scaled.transforms = {{'*', 10}};
  expectError({scaled}, {"sample 1 is 3.00000001e+38, which becomes inf after the transforms in f32"});
  FieldSpec bytes = spec("x", "idx", write("b.idx", idx(0x08, {2}, bytesOf<uint8_t>({0, 200}))));
  bytes.transforms = {{'*', 1e37}};
  expectError({bytes}, {"sample 1 is 200, which becomes inf after the transforms in f32"});
  bytes.transforms = {{'/', 255}};
  EXPECT_EQ(floats(openOk({bytes}), 1, "x"), F{static_cast<float>(200.0 / 255)});
}

// ---------------------------------------------------------------- text and tokens

TEST_F(Loading, TextWindowsShiftTargetsByOne) {
  std::string text = "abcdefghij\xff";  // 11 bytes, seq 4: (11 - 1) / 4 = 2 windows
  for (const std::string& p : {write("t.txt", text), writeGz("t.txt.gz", text)}) {
    FieldSpec tokens = spec("tokens", "text", p, {4}, true), targets = spec("targets", "text", p, {4}, true);
    tokens.seq = targets.seq = 4;
    Dataset ds = openOk({tokens, targets});
    ASSERT_EQ(ds.samples(), 2);
    EXPECT_EQ(ints(ds, 0, "tokens"), (I{'a', 'b', 'c', 'd'}));
    EXPECT_EQ(ints(ds, 0, "targets"), (I{'b', 'c', 'd', 'e'}));
    EXPECT_EQ(ints(ds, 1, "tokens"), (I{'e', 'f', 'g', 'h'}));
    EXPECT_EQ(ints(ds, 1, "targets"), (I{'f', 'g', 'h', 'i'}));
  }
  // Bytes are unsigned; field_of_multi names the role when the input is named otherwise.
  FieldSpec ids = spec("ids", "text", write("hi.txt", "\x80\xff\x01"), {2}, true);
  ids.seq = 2;
  ids.field_of_multi = "targets";
  EXPECT_EQ(ints(openOk({ids}), 0, "ids"), (I{255, 1}));
}

TEST_F(Loading, TokenFiles) {
  auto pair = [](const std::string& p, const std::string& dtype, int64_t seq) {
    FieldSpec a = spec("tokens", "tokens", p, {seq}, true), b = spec("targets", "tokens", p, {seq}, true);
    a.seq = b.seq = seq;
    a.token_dtype = b.token_dtype = dtype;
    return std::vector<FieldSpec>{a, b};
  };
  // 35615 is stored as 1f 8b, the gzip magic: a plain .bin is still read as it is.
  Dataset u16 = openOk(pair(write("a.bin", bytesOf<uint16_t>({35615, 1, 2, 3, 4, 5, 6})), "u16", 3));
  ASSERT_EQ(u16.samples(), 2);
  EXPECT_EQ(ints(u16, 0, "tokens"), (I{35615, 1, 2}));
  EXPECT_EQ(ints(u16, 1, "targets"), (I{4, 5, 6}));
  Dataset u32 = openOk(pair(writeGz("b.bin.gz", bytesOf<uint32_t>({100000, 1, 2})), "u32", 2));
  EXPECT_EQ(ints(u32, 0, "tokens"), (I{100000, 1}));
  EXPECT_EQ(ints(u32, 0, "targets"), (I{1, 2}));
  Dataset i32 = openOk(pair(write("c.bin", bytesOf<int32_t>({5, 6, 7, 8, 9})), "i32", 2));
  EXPECT_EQ(ints(i32, 1, "targets"), (I{8, 9}));
  expectError(pair(write("neg.bin", bytesOf<int32_t>({5, 6, -7, 8, 9})), "i32", 2),
              {"field 'tokens'", "neg.bin", "sample 1, element 0 is -7, which is negative"});
  expectError(pair(write("big.bin", bytesOf<uint32_t>({5, 3000000000u, 1})), "u32", 2),
              {"field 'tokens'", "big.bin: sample 0, element 1 is 3000000000, which is too large",
               "takes whole numbers from 0 to 2147483647"});
}

// ---------------------------------------------------------------- real files

TEST(RealFiles, FashionMnistAndGpl) {
  const std::string dir = "/usr/share/datasets/fashion-mnist/";
  const std::string gpl = "/usr/share/common-licenses/GPL-3";
  if (!fs::exists(dir + "train-images-idx3-ubyte.gz") || !fs::exists(gpl)) GTEST_SKIP() << "datasets not installed";
  FieldSpec image = spec("image", "idx", dir + "t10k-images-idx3-ubyte.gz", {28, 28});
  image.transforms = {{'/', 255}};
  FieldSpec label = spec("label", "idx", dir + "t10k-labels-idx1-ubyte.gz", {}, true);
  Dataset ds = openOk({image, label});
  ASSERT_EQ(ds.samples(), 10000);
  // Against the bytes read independently with zlib.
  auto raw = [](const std::string& path, size_t skip, size_t n) {
    gzFile gz = gzopen(path.c_str(), "rb");
    std::string s(skip + n, '\0');
    gzread(gz, s.data(), static_cast<unsigned>(s.size()));
    gzclose(gz);
    return s.substr(skip);
  };
  for (int64_t i : {0, 1, 4321, 9999}) {
    std::string pixels = raw(image.path, 16 + static_cast<size_t>(i) * 784, 784);
    F want;
    for (char c : pixels) want.push_back(static_cast<float>(static_cast<unsigned char>(c) / 255.0));
    EXPECT_EQ(floats(ds, i, "image"), want) << "sample " << i;
    EXPECT_EQ(ints(ds, i, "label"), I{static_cast<unsigned char>(raw(label.path, 8 + static_cast<size_t>(i), 1)[0])});
  }
  EXPECT_EQ(ints(ds, 0, "label"), I{9});  // the first test image is an ankle boot
  // The training split through three ranks is the one-rank run, cut in three.
  image.path = dir + "train-images-idx3-ubyte.gz";
  label.path = dir + "train-labels-idx1-ubyte.gz";
  Dataset train = openOk({image, label});
  ASSERT_EQ(train.samples(), 60000);
  EXPECT_EQ(train.fields().size(), 2u);
  Loader one(train, {96, 0, 1, true, 42});
  EXPECT_EQ(one.stepsPerEpoch(), 625);
  Batch whole = one.next();
  for (int r = 0; r < 3; ++r) {
    Loader rank(train, {32, r, 3, true, 42});
    Batch part = rank.next();
    EXPECT_EQ(part.floats["image"],
              F(whole.floats["image"].begin() + r * 32 * 784, whole.floats["image"].begin() + (r + 1) * 32 * 784));
    EXPECT_EQ(part.ints["label"], I(whole.ints["label"].begin() + r * 32, whole.ints["label"].begin() + (r + 1) * 32));
  }
  int64_t i = whole.indices[5];
  std::string pixels = raw(image.path, 16 + static_cast<size_t>(i) * 784, 784);
  EXPECT_EQ(whole.floats["image"][5 * 784 + 400], static_cast<float>(static_cast<unsigned char>(pixels[400]) / 255.0));

  FieldSpec tokens = spec("tokens", "text", gpl, {64}, true), targets = spec("targets", "text", gpl, {64}, true);
  tokens.seq = targets.seq = 64;
  Dataset text = openOk({tokens, targets});
  std::ifstream in(gpl, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_EQ(text.samples(), static_cast<int64_t>(bytes.size() - 1) / 64);
  auto window = [&](int64_t from) {
    I out;
    for (int64_t k = from; k < from + 64; ++k) out.push_back(static_cast<unsigned char>(bytes[static_cast<size_t>(k)]));
    return out;
  };
  int64_t last = text.samples() - 1;
  EXPECT_EQ(ints(text, last, "targets"), window(last * 64 + 1));
  EXPECT_EQ(ints(text, 0, "tokens"), window(0));
}

// ---------------------------------------------------------------- errors

TEST_F(Loading, FileErrorsNameFieldAndFile) {
  std::string missing = (dir_ / "train-images-idx3-ubyte.gz").string();
  expectError({spec("image", "idx", missing, {28, 28})},
              {"field 'image': cannot open '" + missing + "': No such file or directory"});
  // A truncated gzip file.
  std::string full = (dir_ / "full.gz").string();
  writeGz("full.gz", idx(0x08, {50, 20}, std::string(1000, '\x07')));
  std::ifstream in(full, std::ios::binary);
  std::string gz((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string cut = write("train-images-idx3-ubyte.gz", gz.substr(0, gz.size() - 12));
  expectError({spec("image", "idx", cut, {20})},
              {"field 'image': " + cut + ": gzip data ends early (the file is truncated)"});
  std::string gpl = write("GPL-3", "not idx at all");
  expectError({spec("x", "idx", gpl)}, {"field 'x': " + gpl + ": not an IDX file"});
  expectError({spec("x", "npy", gpl)}, {"field 'x': " + gpl + ": not a .npy file"});
  FieldSpec st = spec(
      "x", "safetensors",
      write("k.st", safetensors(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", std::string(4, '\0'))));
  st.key = "v";
  expectError({st}, {"field 'x': ", "k.st: no tensor named 'v' (available: 'w')"});
  expectError({spec("x", "csv", write("bad.csv", "a\n1\nx\n"))}, {"field 'x': ", "bad.csv:3: column 0 is 'x'"});
  FieldSpec text = spec("tokens", "text", write("short.txt", "abc"), {4}, true);
  text.seq = 4;
  expectError({text}, {"field 'tokens': ", "short.txt: text(seq = 4) needs at least 5 bytes"});
  text.seq = 0;
  expectError({text}, {"field 'tokens': ", "needs seq >= 1"});
  text.seq = 2;
  text.name = "ids";
  text.sample_dims = {2};
  expectError({text}, {"field 'ids': ", "text(seq = 2) yields the fields tokens and targets; 'ids' is neither"});
  FieldSpec tok = spec("tokens", "tokens", write("odd.bin", "abc"), {1}, true);
  tok.seq = 1;
  expectError({tok}, {"field 'tokens': ", "odd.bin: file is 3 bytes, not a whole number of u16 tokens"});
}

TEST_F(Loading, SpecErrors) {
  std::string p = write("a.idx", idx(0x08, {4, 3}, std::string(12, '\x01')));
  expectError({}, {"a data split needs at least one field"});
  expectError({spec("x", "parquet", p)}, {"field 'x': unknown source 'parquet'"});
  expectError({spec("x", "idx", "")}, {"field 'x': idx source has no path"});
  expectError({spec("x", "idx", p, {3}), spec("x", "idx", p, {3})}, {"field 'x': the split feeds it twice"});
  // Element count against the input's dims.
  expectError({spec("image", "idx", p, {2, 2})},
              {"field 'image': " + p + ": each sample has 3 values but input 'image' takes 4 (2×2)"});
  std::string img = write("img.idx", idx(0x08, {2, 2, 3}, std::string(12, '\x01')));
  expectError({spec("image", "idx", img, {7})}, {"each sample has 6 values (2×3) but input 'image' takes 7"});
  // Sample counts must agree.
  std::string five = write("five.idx", idx(0x08, {5}, std::string(5, '\x01')));
  expectError({spec("image", "idx", p, {3}), spec("label", "idx", five, {}, true)},
              {"field 'label': " + five + " has 5 samples but field 'image' (" + p + ") has 4",
               "every field of a split needs the same number of samples"});
  // Integer inputs: no transforms, no fractions, no negatives.
  FieldSpec t = spec("label", "idx", five, {}, true);
  t.transforms = {{'-', 1}};
  expectError({t}, {"field 'label': " + five +
                    ": input 'label' is i32 (ids, labels), which takes the data as stored; "
                    "remove the transform"});
  std::string frac = write("frac.idx", idx(0x0D, {3}, bytesOf({1.0f, 2.5f, 3.0f}, true)));
  expectError({spec("label", "idx", frac, {}, true)},
              {"field 'label': " + frac + ": sample 1 is 2.5, which is not a whole number; input 'label' is i32"});
  std::string neg = write("neg.idx", idx(0x09, {2, 2}, bytesOf<int8_t>({0, 1, 2, -3})));
  expectError({spec("label", "idx", neg, {2}, true)},
              {"field 'label': " + neg + ": sample 1, element 1 is -3, which is negative"});
  FieldSpec div = spec("x", "idx", p, {3});
  div.transforms = {{'/', 0}};
  expectError({div}, {"field 'x': transform divides by zero"});
}

// ---------------------------------------------------------------- synthetic

std::vector<FieldSpec> mlp(uint64_t seed, int64_t features = 8, int64_t classes = 4) {
  FieldSpec x = spec("x", "synthetic", "", {features}), y = spec("label", "synthetic", "", {}, true);
  x.seed = y.seed = seed;
  y.int_range = classes;
  return {x, y};
}

TEST(Synthetic, EverySampleIsReproducibleAlone) {
  Dataset a = openOk(mlp(1)), b = openOk(mlp(1)), c = openOk(mlp(2));
  EXPECT_EQ(a.samples(), int64_t{1} << 20);
  EXPECT_EQ(kSyntheticSamples, int64_t{1} << 20);
  Batch one, many;
  a.copySample(777, one, 0);
  for (int64_t slot : {5, 0, 3, 1})  // any slot, any order, another Dataset
    b.copySample(slot == 3 ? 777 : slot * 1000, many, slot);
  EXPECT_EQ(F(many.floats["x"].begin() + 24, many.floats["x"].begin() + 32), one.floats["x"]);
  EXPECT_EQ(many.ints["label"][3], one.ints["label"][0]);
  EXPECT_NE(floats(c, 777, "x"), one.floats["x"]);
  EXPECT_EQ(floats(a, (1 << 20) - 1, "x").size(), 8u);
  // Two float inputs of one seed are different streams.
  std::vector<FieldSpec> two = mlp(1);
  two.insert(two.begin(), spec("z", "synthetic", "", {8}));
  two[0].seed = 1;
  Dataset d = openOk(two);
  EXPECT_EQ(floats(d, 5, "x"), floats(a, 5, "x"));
  EXPECT_NE(floats(d, 5, "z"), floats(d, 5, "x"));
}

TEST(Synthetic, FloatsAreStandardNormal) {
  Dataset ds = openOk(mlp(3));
  double sum = 0, sq = 0;
  int64_t n = 0;
  for (int64_t i = 0; i < 20000; ++i)
    for (float v : floats(ds, i * 37, "x")) {
      sum += v;
      sq += double{v} * v;
      ++n;
    }
  double mean = sum / static_cast<double>(n), var = sq / static_cast<double>(n) - mean * mean;
  EXPECT_LT(std::abs(mean), 0.02);
  EXPECT_LT(std::abs(var - 1), 0.03);
}

// A softmax regression trained on the teacher's labels must beat chance by far.
TEST(Synthetic, TeacherLabelsAreLearnable) {
  const int64_t d = 8, k = 4, train = 4000, test = 1000;
  Dataset ds = openOk(mlp(11, d, k));
  std::vector<F> xs;
  std::vector<int> ys, counts(k, 0);
  for (int64_t i = 0; i < train + test; ++i) {
    Batch b;
    ds.copySample(i, b, 0);
    xs.push_back(b.floats["x"]);
    ys.push_back(b.ints["label"][0]);
    ASSERT_GE(ys.back(), 0);
    ASSERT_LT(ys.back(), k);
    ++counts[static_cast<size_t>(ys.back())];
  }
  for (int c = 0; c < k; ++c) EXPECT_GT(counts[static_cast<size_t>(c)], (train + test) / 20) << "class " << c;
  std::vector<double> w(static_cast<size_t>(d * k), 0.0);
  auto scores = [&](const F& x) {
    std::vector<double> s(k, 0.0);
    for (int64_t c = 0; c < k; ++c)
      for (int64_t j = 0; j < d; ++j)
        s[static_cast<size_t>(c)] += w[static_cast<size_t>(c * d + j)] * x[static_cast<size_t>(j)];
    return s;
  };
  for (int epoch = 0; epoch < 20; ++epoch)
    for (int64_t i = 0; i < train; ++i) {
      std::vector<double> s = scores(xs[static_cast<size_t>(i)]);
      double mx = *std::max_element(s.begin(), s.end()), z = 0;
      for (double& v : s) z += (v = std::exp(v - mx));
      for (int64_t c = 0; c < k; ++c) {
        double g = s[static_cast<size_t>(c)] / z - (c == ys[static_cast<size_t>(i)] ? 1 : 0);
        for (int64_t j = 0; j < d; ++j)
          w[static_cast<size_t>(c * d + j)] -= 0.1 * g * xs[static_cast<size_t>(i)][static_cast<size_t>(j)];
      }
    }
  int right = 0;
  for (int64_t i = train; i < train + test; ++i) {
    std::vector<double> s = scores(xs[static_cast<size_t>(i)]);
    right += std::max_element(s.begin(), s.end()) - s.begin() == ys[static_cast<size_t>(i)];
  }
  EXPECT_GT(right, test * 9 / 10);
  // Another seed is another teacher.
  Dataset other = openOk(mlp(12, d, k));
  int same = 0;
  for (int64_t i = 0; i < 200; ++i) same += ints(other, i, "label") == ints(ds, i, "label");
  EXPECT_LT(same, 150);
}

TEST(Synthetic, LanguageModellingMap) {
  FieldSpec targets = spec("targets", "synthetic", "", {16}, true),
            tokens = spec("tokens", "synthetic", "", {16}, true);
  targets.int_range = tokens.int_range = 50;
  targets.seed = tokens.seed = 4;
  Dataset ds = openOk({targets, tokens});  // listed first, still derived
  std::set<int32_t> seen;
  for (int64_t i = 0; i < 100; ++i) {
    I tok = ints(ds, i, "tokens"), tgt = ints(ds, i, "targets");
    ASSERT_EQ(tok.size(), 16u);
    for (size_t t = 0; t < 16; ++t) {
      ASSERT_GE(tok[t], 0);
      ASSERT_LT(tok[t], 50);
      EXPECT_EQ(tgt[t], (tok[t] * 7 + 3) % 50);
      seen.insert(tok[t]);
    }
  }
  EXPECT_EQ(seen.size(), 50u);
  // int_range 0 means 2; a lone integer field is random.
  FieldSpec bits = spec("label", "synthetic", "", {64}, true);
  I b = ints(openOk({bits}), 9, "label");
  EXPECT_EQ(std::set<int32_t>(b.begin(), b.end()), (std::set<int32_t>{0, 1}));
}

TEST_F(Loading, SyntheticLabelsForFileInputs) {
  std::string p = write("x.npy", npy("<f4", "(6, 2)", bytesOf<float>({1, 0, 0, 1, -1, 0, 0, -1, 1, 0, 2, 0})));
  FieldSpec label = spec("label", "synthetic", "", {}, true);
  label.int_range = 5;
  Dataset ds = openOk({spec("x", "npy", p, {2}), label});
  EXPECT_EQ(ds.samples(), 6);  // the file's count, not 2^20
  // Linear without bias: x and 2x get the same label.
  EXPECT_EQ(ints(ds, 0, "label"), ints(ds, 5, "label"));
  EXPECT_EQ(ints(ds, 0, "label"), ints(ds, 4, "label"));
}

// ---------------------------------------------------------------- the loader

// Sample i holds x = i and label = i mod 7.
Dataset counting(Loading& t, int64_t n) {
  std::string xs, ys;
  for (int64_t i = 0; i < n; ++i) {
    xs += bytesOf<float>({static_cast<float>(i)});
    ys += bytesOf<int32_t>({static_cast<int32_t>(i % 7)});
  }
  std::string shape = "(" + std::to_string(n) + ",)";
  return openOk({spec("x", "npy", t.write("x.npy", npy("<f4", shape, xs))),
                 spec("label", "npy", t.write("y.npy", npy("<i4", shape, ys)), {}, true)});
}

std::vector<Batch> take(Loader& l, int n) {
  std::vector<Batch> out;
  for (int k = 0; k < n; ++k) out.push_back(l.next());
  return out;
}

void expectSame(const std::vector<Batch>& a, const std::vector<Batch>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t k = 0; k < a.size(); ++k) {
    EXPECT_EQ(a[k].indices, b[k].indices) << "batch " << k;
    EXPECT_EQ(a[k].floats, b[k].floats) << "batch " << k;
    EXPECT_EQ(a[k].ints, b[k].ints) << "batch " << k;
    EXPECT_EQ(a[k].epoch, b[k].epoch);
    EXPECT_EQ(a[k].step_in_epoch, b[k].step_in_epoch);
  }
}

TEST_F(Loading, RanksTogetherSeeWhatOneRankSees) {
  Dataset ds = counting(*this, 103);
  const int64_t b = 3;
  for (int world = 1; world <= 4; ++world) {
    Loader single(ds, {b * world, 0, 1, true, 7});
    int64_t steps = 103 / (b * world);
    ASSERT_EQ(single.stepsPerEpoch(), steps);
    int n = static_cast<int>(2 * steps + 1);  // into a third epoch
    std::vector<Batch> want = take(single, n);
    std::vector<std::vector<Batch>> got(static_cast<size_t>(world));
    std::vector<std::thread> ranks;  // ranks as threads sharing one Dataset
    for (int r = 0; r < world; ++r)
      ranks.emplace_back([&, r] {
        Loader l(ds, {b, r, world, true, 7});
        got[static_cast<size_t>(r)] = take(l, n);
      });
    for (auto& t : ranks) t.join();
    std::set<int64_t> epoch0;
    for (int k = 0; k < n; ++k) {
      std::vector<int64_t> indices;
      F xs;
      I labels;
      for (int r = 0; r < world; ++r) {
        const Batch& part = got[static_cast<size_t>(r)][static_cast<size_t>(k)];
        EXPECT_EQ(part.epoch, k / steps);
        EXPECT_EQ(part.step_in_epoch, k % steps);
        indices.insert(indices.end(), part.indices.begin(), part.indices.end());
        xs.insert(xs.end(), part.floats.at("x").begin(), part.floats.at("x").end());
        labels.insert(labels.end(), part.ints.at("label").begin(), part.ints.at("label").end());
        if (k < steps) epoch0.insert(part.indices.begin(), part.indices.end());
      }
      const Batch& w = want[static_cast<size_t>(k)];
      EXPECT_EQ(indices, w.indices) << "world " << world << " batch " << k;
      EXPECT_EQ(xs, w.floats.at("x"));
      EXPECT_EQ(labels, w.ints.at("label"));
      for (size_t s = 0; s < indices.size(); ++s) {
        EXPECT_EQ(xs[s], static_cast<float>(indices[s]));
        EXPECT_EQ(labels[s], indices[s] % 7);
      }
    }
    EXPECT_EQ(static_cast<int64_t>(epoch0.size()), steps * b * world) << "disjoint within an epoch";
  }
}

TEST_F(Loading, ShuffleIsSeededPerEpoch) {
  // Pinned: a change here breaks resuming old checkpoints with the same data order.
  EXPECT_EQ(epochOrder(10, 42, 0), (std::vector<int64_t>{4, 3, 5, 1, 0, 9, 7, 2, 6, 8}));
  std::vector<int64_t> e0 = epochOrder(1000, 1, 0), sorted = e0;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> identity(1000);
  std::iota(identity.begin(), identity.end(), int64_t{0});
  EXPECT_EQ(sorted, identity);
  EXPECT_NE(e0, identity);
  EXPECT_NE(e0, epochOrder(1000, 1, 1));
  EXPECT_NE(e0, epochOrder(1000, 2, 0));
  EXPECT_EQ(e0, epochOrder(1000, 1, 0));

  Dataset ds = counting(*this, 40);
  Loader a(ds, {5, 0, 1, true, 9}), b(ds, {5, 0, 1, true, 9});
  std::vector<Batch> x = take(a, 24), y = take(b, 24);
  expectSame(x, y);
  std::vector<int64_t> first, second;
  for (int k = 0; k < 8; ++k) {
    first.insert(first.end(), x[static_cast<size_t>(k)].indices.begin(), x[static_cast<size_t>(k)].indices.end());
    second.insert(second.end(), x[static_cast<size_t>(k + 8)].indices.begin(),
                  x[static_cast<size_t>(k + 8)].indices.end());
  }
  EXPECT_EQ(first, epochOrder(40, 9, 0));
  EXPECT_EQ(second, epochOrder(40, 9, 1));
  Loader plain(ds, {5, 0, 1, false, 9});
  std::vector<Batch> p = take(plain, 9);
  EXPECT_EQ(p[1].indices, (std::vector<int64_t>{5, 6, 7, 8, 9}));
  EXPECT_EQ(p[8].indices, (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(p[8].epoch, 1);
}

TEST_F(Loading, DropLastAndBadOptions) {
  Dataset ds = counting(*this, 10);
  Loader l(ds, {3, 0, 1, false, 0});
  ASSERT_TRUE(l.status().ok) << l.status().message;
  EXPECT_EQ(l.stepsPerEpoch(), 3);
  std::vector<Batch> b = take(l, 4);
  EXPECT_EQ(b[2].indices, (std::vector<int64_t>{6, 7, 8}));  // sample 9 is dropped
  EXPECT_EQ(b[3].indices, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(b[3].epoch, 1);
  EXPECT_EQ(Loader(ds, {2, 1, 2, false, 0}).stepsPerEpoch(), 2);
  EXPECT_EQ(Loader(ds, {10, 0, 1, false, 0}).stepsPerEpoch(), 1);
  EXPECT_EQ(Loader(ds, {6, 0, 2}).status().message,
            "the split has 10 samples, fewer than one global batch of 12 (batch 6 × 2 ranks); the short last batch "
            "is dropped, so no step could run");
  EXPECT_EQ(Loader(ds, {0}).status().message, "batch is 0; it must be at least 1");
  EXPECT_EQ(Loader(ds, {1, 2, 2}).status().message, "rank 2 is outside a world of 2 ranks");
  EXPECT_FALSE(Loader(Dataset(), {1}).status().ok);
}

TEST_F(Loading, CursorAndSeekReproduceTheSameBatches) {
  Dataset ds = counting(*this, 50);
  Loader a(ds, {4, 1, 3, true, 5});  // 4 steps per epoch
  ASSERT_EQ(a.stepsPerEpoch(), 4);
  EXPECT_EQ(a.cursor(), (std::pair<int64_t, int64_t>{0, 0}));
  take(a, 6);
  EXPECT_EQ(a.cursor(), (std::pair<int64_t, int64_t>{1, 2}));
  auto [epoch, step] = a.cursor();
  std::vector<Batch> want = take(a, 9);  // crosses two epoch boundaries
  EXPECT_EQ(want[0].epoch, 1);
  EXPECT_EQ(want[0].step_in_epoch, 2);
  Loader b(ds, {4, 1, 3, true, 5});
  b.seek(epoch, step);
  expectSame(take(b, 9), want);
  Loader c(ds, {4, 1, 3, true, 5, 0});
  c.seek(0, 6);  // a global step carries into the epoch
  EXPECT_EQ(c.cursor(), (std::pair<int64_t, int64_t>{1, 2}));
  expectSame(take(c, 9), want);
  a.seek(epoch, step);  // rewinding a running loader restarts its thread
  expectSame(take(a, 9), want);
}

TEST_F(Loading, PrefetchMatchesSynchronous) {
  Dataset files = counting(*this, 37);
  std::vector<FieldSpec> synth = mlp(5, 6, 3);
  synth.push_back(spec("tokens", "synthetic", "", {4}, true));
  Dataset synthetic = openOk(synth);
  for (const Dataset* ds : {&files, &synthetic})
    for (int world : {1, 3}) {
      LoaderOptions opt{4, world - 1, world, true, 2, 0};
      Loader sync(*ds, opt);
      std::vector<Batch> want = take(sync, 12);
      for (int depth : {1, 3}) {
        opt.prefetch = depth;
        Loader pre(*ds, opt);
        expectSame(take(pre, 12), want);
      }
    }
  // Batches of the synthetic split are exactly its samples.
  Loader l(synthetic, {4, 0, 1, true, 3});
  Batch b = l.next();
  Batch direct;
  for (int64_t s = 0; s < 4; ++s) synthetic.copySample(b.indices[static_cast<size_t>(s)], direct, s);
  EXPECT_EQ(b.floats, direct.floats);
  EXPECT_EQ(b.ints, direct.ints);
}

// A recycled batch is written over whole: batches taken while every used
// one goes back, scribbled on first, equal those of a loader given none
// back — for every kind of field. Without the prefetch thread the next
// batch is the one given back (its buffers, not new ones); a batch of
// another shape is not kept.
TEST_F(Loading, RecycledBatchesEqualFreshOnes) {
  std::string pixels;
  for (int k = 0; k < 23 * 5; ++k) pixels += static_cast<char>(k * 37);
  FieldSpec bytes = spec("image", "idx", write("pixels.idx", idx(0x08, {23, 5}, pixels)), {5});
  bytes.transforms = {{'/', 255}};
  std::vector<FieldSpec> synth = mlp(5, 6, 3);
  synth.push_back(spec("tokens", "synthetic", "", {4}, true));
  FieldSpec lm_tokens = spec("tokens", "synthetic", "", {6}, true), lm_targets = spec("targets", "synthetic", "", {6}, true);
  lm_tokens.int_range = lm_targets.int_range = 11;
  std::string text;
  for (int k = 0; k < 97; ++k) text += static_cast<char>('a' + k % 26);
  FieldSpec text_tokens = spec("tokens", "text", write("r.txt", text), {4}, true);
  FieldSpec text_targets = spec("targets", "text", write("r.txt", text), {4}, true);
  text_tokens.seq = text_targets.seq = 4;
  const std::vector<Dataset> sets = {counting(*this, 37), openOk({bytes}), openOk(synth), openOk({lm_tokens, lm_targets}),
                                     openOk({text_tokens, text_targets})};
  for (size_t d = 0; d < sets.size(); ++d)
    for (int depth : {0, 2}) {
      SCOPED_TRACE("dataset " + std::to_string(d) + ", prefetch " + std::to_string(depth));
      const Dataset& ds = sets[d];
      LoaderOptions opt{4, 0, 1, true, 2, depth};
      Loader fresh(ds, opt), reused(ds, opt);
      std::vector<Batch> want = take(fresh, 13), got;
      Loader other(ds, {5, 0, 1, true, 2, 0});
      reused.recycle(other.next());  // five samples, not four: dropped
      const void* given_back = nullptr;
      for (int k = 0; k < 13; ++k) {
        got.push_back(reused.next());
        if (depth == 0 && given_back) {
          const Batch& b = got.back();
          EXPECT_EQ(b.floats.empty() ? static_cast<const void*>(b.ints.begin()->second.data())
                                     : static_cast<const void*>(b.floats.begin()->second.data()),
                    given_back) << "batch " << k << " is not the one given back";
        }
        Batch used = got.back();  // a copy: `got` keeps the values
        for (auto& [name, v] : used.floats) std::fill(v.begin(), v.end(), std::nanf(""));
        for (auto& [name, v] : used.ints) std::fill(v.begin(), v.end(), -1);
        std::fill(used.indices.begin(), used.indices.end(), -1);
        given_back = used.floats.empty() ? static_cast<const void*>(used.ints.begin()->second.data())
                                         : static_cast<const void*>(used.floats.begin()->second.data());
        reused.recycle(std::move(used));
      }
      expectSame(got, want);
    }
}

TEST_F(Loading, DestructorAndSeekWhileTheThreadWaits) {
  Dataset ds = counting(*this, 64);
  for (int k = 0; k < 50; ++k) {
    Loader never(ds, {4, 0, 1, true, 1, 3});
    Loader once(ds, {4, 0, 1, true, 1, 3});
    once.next();  // its thread now fills the queue and blocks
    if (k % 2) {
      once.seek(static_cast<int64_t>(k), 1);
      EXPECT_EQ(once.next().epoch, k);
    }
  }
}

}  // namespace
