// Checkpoints never load wrong numbers: XXH64 against the specification's
// vectors, a checksum on every tensor and on state.json (every single-bit
// flip of a saved checkpoint is refused or harmless), --resume's fall-back to
// the newest checkpoint that verifies, old checkpoints without checksums,
// pruning only once a newer checkpoint is confirmed, the folder lock, and
// which rank writes what on a dp×tp mesh.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/hash.h"
#include "core/xxhash.h"
#include "runtime/exec/writer_ranks.h"
#include "runtime/io/checkpoint_store.h"
#include "runtime/io/checksums.h"
#include "runtime/io/dir_lock.h"
#include "runtime/io/safetensors.h"
#include "tests/unit/scratch_dir.h"

namespace dtl::rt::io {
namespace {

namespace fs = std::filesystem;

class Integrity : public dtl::testing::ScratchDirTest {};

std::string slurp(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TensorBlob blob(std::string name, std::vector<int64_t> shape, uint8_t seed) {
  int64_t n = 4;
  for (int64_t d : shape) n *= d;
  std::vector<uint8_t> b(static_cast<size_t>(n));
  for (size_t k = 0; k < b.size(); ++k) b[k] = static_cast<uint8_t>(seed + 37 * k);
  return {std::move(name), "F32", std::move(shape), std::move(b)};
}

CheckpointContents contents(int64_t step) {
  CheckpointContents c;
  c.step = step;
  auto seed = static_cast<uint8_t>(step);
  c.params = {blob("l1.weight", {3, 2}, seed), blob("l1.bias", {3}, seed + 1)};
  c.optimizer = {blob("l1.weight.exp_avg", {3, 2}, seed + 2)};
  c.state_json = R"({"step": )" + std::to_string(step) + R"(, "epoch": 1})";
  return c;
}

bool same(const CheckpointContents& a, const CheckpointContents& b) {
  auto eq = [](const std::vector<TensorBlob>& x, const std::vector<TensorBlob>& y) {
    if (x.size() != y.size()) return false;
    for (size_t k = 0; k < x.size(); ++k)
      if (x[k].name != y[k].name || x[k].dtype != y[k].dtype || x[k].shape != y[k].shape || x[k].bytes != y[k].bytes)
        return false;
    return true;
  };
  return a.step == b.step && eq(a.params, b.params) && eq(a.optimizer, b.optimizer) && a.state_json == b.state_json;
}

void flipBit(const std::string& file, size_t bit) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(bit / 8));
  char c = 0;
  f.get(c);
  c = static_cast<char>(c ^ (1 << (bit % 8)));
  f.seekp(static_cast<std::streamoff>(bit / 8));
  f.put(c);
}

TEST(Xxh64, SpecificationVectors) {
  EXPECT_EQ(xxh64(""), 0xEF46DB3751D8E999ULL);
  EXPECT_EQ(xxh64("", 0, 1), 0xD5AFBA1336A3BE4BULL);
  EXPECT_EQ(xxh64("a"), 0xD24EC4F1A98C6E5BULL);
  EXPECT_EQ(xxh64("abc"), 0x44BC2CF5AD770999ULL);
  EXPECT_EQ(xxh64("abc", 3, 12345), 0x01700E64F6F23509ULL);
  EXPECT_EQ(xxh64("0123456789abcdef0123456789abcdef"), 0x642A94958E71E6C5ULL);  // exactly one stripe
  const std::string nobody = "Nobody inspects the spammish repetition";      // a stripe, 4 and 3 tail bytes
  EXPECT_EQ(xxh64(nobody), 0xFBCEA83C8A378BF1ULL);
  EXPECT_EQ(xxh64(nobody.data(), nobody.size(), 123), 0xA8BA45551F24B7AEULL);
  EXPECT_EQ(xxh64("The quick brown fox jumps over the lazy dog"), 0x0B242D361FDA71BCULL);
}

// Not a benchmark: a floor far below the expected rate (several GB/s) that
// still fails a byte-at-a-time hash like FNV-1a on a loaded machine.
TEST(Xxh64, IsFasterThanFnv) {
  std::vector<uint8_t> data(16 << 20, 0x5a);
  auto time = [&](auto&& f) {
    double best = 1e9;
    for (int r = 0; r < 3; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      volatile uint64_t h = f();
      (void)h;
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return best;
  };
  double x = time([&] { return xxh64(data.data(), data.size(), 0); });
  double f = time([&] { return fnv1a(data.data(), data.size()); });
  EXPECT_LT(x * 2, f) << "xxh64 " << data.size() / x / 1e9 << " GB/s, fnv1a " << data.size() / f / 1e9 << " GB/s";
}

TEST_F(Integrity, EveryTensorAndStateCarryAChecksum) {
  std::string dir = path("ck");
  CheckpointContents c = contents(5);
  ASSERT_TRUE(CheckpointStore(dir, 0).save(c).ok);
  std::vector<TensorBlob> t;
  std::map<std::string, std::string> meta;
  ASSERT_TRUE(readSafetensors(dir + "/step-00000005/params.safetensors", t, &meta).ok);
  EXPECT_EQ(meta, (std::map<std::string, std::string>{
                      {"format", "pt"}, {"step", "5"}, {"checksums", "xxh64"},
                      {"xxh64:l1.weight", hex64(xxh64(c.params[0].bytes.data(), c.params[0].bytes.size(), 0))},
                      {"xxh64:l1.bias", hex64(xxh64(c.params[1].bytes.data(), c.params[1].bytes.size(), 0))},
                      {"xxh64:state.json", hex64(xxh64(c.state_json))}}));
  ASSERT_TRUE(readSafetensors(dir + "/step-00000005/optimizer.safetensors", t, &meta).ok);
  EXPECT_EQ(meta.at("xxh64:l1.weight.exp_avg"), hex64(xxh64(c.optimizer[0].bytes.data(), 24, 0)));
}

TEST_F(Integrity, AFlippedBitInATensorIsRefusedNamingIt) {
  std::string dir = path("ck");
  ASSERT_TRUE(CheckpointStore(dir, 0).save(contents(5)).ok);
  std::string file = dir + "/step-00000005/params.safetensors";
  size_t size = fs::file_size(file);
  flipBit(file, (size - 1) * 8 + 6);  // the last tensor's (l1.bias) last byte
  CheckpointContents out;
  Status s = CheckpointStore::loadLatest(dir, out);
  ASSERT_FALSE(s.ok);
  EXPECT_EQ(s.message.rfind(file + ": tensor `l1.bias` does not match its checksum (stored ", 0), 0u) << s.message;
  EXPECT_NE(s.message.find("): the file is corrupt"), std::string::npos) << s.message;
  EXPECT_EQ(out.step, 0);
}

// Every single-bit flip anywhere in a checkpoint's three files either stops
// the load or changes nothing that is loaded.
TEST_F(Integrity, NoSingleBitFlipLoadsDifferentNumbers) {
  std::string dir = path("ck");
  CheckpointContents c = contents(5);
  ASSERT_TRUE(CheckpointStore(dir, 0).save(c).ok);
  int refused = 0, harmless = 0;
  for (const char* name : {"params.safetensors", "optimizer.safetensors", "state.json"}) {
    std::string file = dir + "/step-00000005/" + name;
    std::string good = slurp(file);
    for (size_t bit = 0; bit < good.size() * 8; ++bit) {
      flipBit(file, bit);
      CheckpointContents out;
      if (CheckpointStore::loadLatest(dir, out).ok) {
        EXPECT_TRUE(same(out, c)) << name << " bit " << bit;
        ++harmless;
      } else {
        ++refused;
      }
      flipBit(file, bit);
    }
  }
  // The harmless ones flip a bit of `"format": "pt"` or of the JSON's
  // whitespace into other whitespace.
  EXPECT_LT(harmless * 20, refused) << harmless << " harmless, " << refused << " refused";
}

TEST_F(Integrity, ResumeFallsBackToTheNewestCheckpointThatVerifies) {
  std::string dir = path("ck");
  CheckpointStore store(dir, 0);
  for (int64_t step : {10, 20, 30}) ASSERT_TRUE(store.save(contents(step)).ok);
  flipBit(dir + "/step-00000030/optimizer.safetensors", fs::file_size(dir + "/step-00000030/optimizer.safetensors") * 8 - 1);
  { std::ofstream(dir + "/step-00000020/state.json", std::ios::app) << " "; }
  CheckpointContents out;
  LoadReport report;
  Status s = CheckpointStore::loadNewestIntact(dir, out, report);
  ASSERT_TRUE(s.ok) << s.message;
  EXPECT_EQ(report.name, "step-00000010");
  EXPECT_TRUE(same(out, contents(10)));
  ASSERT_EQ(report.skipped.size(), 2u);
  EXPECT_EQ(report.skipped[0].rfind("step-00000030: " + dir +
                                        "/step-00000030/optimizer.safetensors: tensor `l1.weight.exp_avg` does not match",
                                    0),
            0u)
      << report.skipped[0];
  EXPECT_EQ(report.skipped[1].rfind("step-00000020: " + dir + "/step-00000020/state.json: does not match its checksum", 0),
            0u)
      << report.skipped[1];
  EXPECT_TRUE(report.warning.empty());

  // None verifies: the error lists each.
  flipBit(dir + "/step-00000010/params.safetensors", fs::file_size(dir + "/step-00000010/params.safetensors") * 8 - 1);
  s = CheckpointStore::loadNewestIntact(dir, out, report);
  ASSERT_FALSE(s.ok);
  EXPECT_EQ(s.message.rfind(dir + ": cannot resume: no checkpoint there verifies:\n  step-00000030: ", 0), 0u) << s.message;
  EXPECT_NE(s.message.find("\n  step-00000010: " + dir + "/step-00000010/params.safetensors: tensor `l1.bias`"),
            std::string::npos)
      << s.message;

  // An unreadable index: the step-* folders by step instead, saying so.
  ASSERT_TRUE(store.save(contents(40)).ok);
  std::ofstream(dir + "/index.json") << "{";
  s = CheckpointStore::loadNewestIntact(dir, out, report);
  ASSERT_TRUE(s.ok) << s.message;
  EXPECT_EQ(report.name, "step-00000040");
  ASSERT_EQ(report.skipped.size(), 1u);
  EXPECT_NE(report.skipped[0].find("index.json: corrupt"), std::string::npos) << report.skipped[0];
}

// A checkpoint written before checksums (no metadata): loaded, with a warning.
TEST_F(Integrity, CheckpointsWithoutChecksumsLoadWithAWarning) {
  std::string dir = path("ck"), folder = dir + "/step-00000007";
  CheckpointContents c = contents(7);
  ASSERT_TRUE(CheckpointStore(dir, 0).save(c).ok);
  ASSERT_TRUE(writeSafetensors(folder + "/params.safetensors", c.params, {{"format", "pt"}, {"step", "7"}}).ok);
  ASSERT_TRUE(writeSafetensors(folder + "/optimizer.safetensors", c.optimizer, {{"format", "pt"}}).ok);
  CheckpointContents out;
  LoadReport report;
  ASSERT_TRUE(CheckpointStore::loadNewestIntact(dir, out, report).ok);
  EXPECT_TRUE(same(out, c));
  EXPECT_EQ(report.warning, folder + ": written without checksums (by an older dtl), so loaded unverified");
  // Half a checkpoint with checksums is not an old one.
  ASSERT_TRUE(CheckpointStore(dir, 0).save(c).ok);
  ASSERT_TRUE(writeSafetensors(folder + "/optimizer.safetensors", c.optimizer, {{"format", "pt"}}).ok);
  Status s = CheckpointStore::loadLatest(dir, out);
  EXPECT_EQ(s.message, folder + "/optimizer.safetensors: has no checksums, but params.safetensors beside it has: the "
                                "file is corrupt or comes from another checkpoint");
}

TEST_F(Integrity, PruneLaterKeepsOlderCheckpointsUntilConfirmed) {
  std::string dir = path("ck");
  CheckpointStore store(dir, 1);
  ASSERT_TRUE(store.save(contents(1), Prune::Later).ok);
  ASSERT_TRUE(store.save(contents(2), Prune::Later).ok);
  std::vector<std::string> names;
  ASSERT_TRUE(CheckpointStore::list(dir, names).ok);
  EXPECT_EQ(names, (std::vector<std::string>{"step-00000001", "step-00000002"}));
  ASSERT_TRUE(store.prune().ok);
  ASSERT_TRUE(CheckpointStore::list(dir, names).ok);
  EXPECT_EQ(names, (std::vector<std::string>{"step-00000002"}));
  EXPECT_FALSE(fs::exists(dir + "/step-00000001"));

  // A checkpoint that led to a diverged step is set aside, the older one is the latest again.
  ASSERT_TRUE(store.save(contents(3), Prune::Later).ok);
  std::string moved;
  ASSERT_TRUE(store.withdraw("step-00000003", moved).ok);
  EXPECT_EQ(moved, dir + "/diverged-step-00000003");
  EXPECT_TRUE(fs::exists(moved + "/params.safetensors"));
  ASSERT_TRUE(CheckpointStore::list(dir, names).ok);
  EXPECT_EQ(names, (std::vector<std::string>{"step-00000002"}));
}

TEST_F(Integrity, ASecondJobCannotLockTheFolder) {
  std::string dir = path("ck");
  DirLock first, second;
  ASSERT_TRUE(first.acquire(dir).ok);
  Status s = second.acquire(dir);
  ASSERT_FALSE(s.ok);
  std::string owner = lockOwnerText();
  EXPECT_EQ(s.message.rfind(dir + ": in use by another job (pid " + std::to_string(getpid()) + " on host ", 0), 0u)
      << s.message;
  EXPECT_NE(s.message.find("\nhint: wait for that job to finish, or give this run another `checkpoint` folder"),
            std::string::npos);
  EXPECT_EQ(slurp(dir + "/.lock").rfind("pid " + std::to_string(getpid()) + " on host ", 0), 0u);
  first.release();
  EXPECT_TRUE(second.acquire(dir).ok);
  // Saving leaves the lock file alone.
  ASSERT_TRUE(CheckpointStore(dir, 1).save(contents(1)).ok);
  EXPECT_TRUE(fs::exists(dir + "/.lock"));
}

// mesh dp = 2, tp = 2: rank = dp·2 + tp.
TEST(WriterRanks, LogsFromRankZeroAndEachPieceFromTheLowestHolder) {
  const std::vector<int64_t> mesh = {2, 2};
  EXPECT_EQ(meshCoords(mesh, 3), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(meshCoords(mesh, 1), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(meshRank(mesh, {1, 0}), 2);
  auto writers = [&](const std::vector<bool>& sharded) {
    std::vector<int64_t> w;
    for (int64_t r = 0; r < 4; ++r)
      if (writesTensor(mesh, sharded, r)) w.push_back(r);
    return w;
  };
  // Logs and metrics: global rank 0 only — not every rank whose dp coordinate is 0 (ranks 0 and 1).
  for (int64_t r = 0; r < 4; ++r) EXPECT_EQ(writesLogs(r), r == 0) << r;
  EXPECT_EQ(writers({}), (std::vector<int64_t>{0}));                  // replicated
  EXPECT_EQ(writers({false, true}), (std::vector<int64_t>{0, 1}));    // sharded over tp: each tp piece once
  EXPECT_EQ(writers({true, false}), (std::vector<int64_t>{0, 2}));    // sharded over dp (ZeRO)
  EXPECT_EQ(writers({true, true}), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(tensorWriter(mesh, {false, true}, 3), 1);  // rank 3 holds tp piece 1, as rank 1 does
  EXPECT_EQ(tensorWriter({}, {}, 0), 0);               // one rank, no mesh
  // An odd mesh: dp = 3, tp = 2, pp = 1.
  EXPECT_EQ(tensorWriter({3, 2, 1}, {false, true, false}, 5), 1);
}

}  // namespace
}  // namespace dtl::rt::io
