// Data loading for training (language.md §7): a Dataset reads every field of
// one split into memory when opened, and a Loader walks it in a seeded
// per-epoch order, handing each rank its disjoint slice of every global batch
// from a prefetch thread. File problems come back as Status, never abort.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "runtime/data/probe.h"

namespace dtl::rt::data {

// One `/ c`, `* c`, `- c` or `+ c` on a source; applied in order, in double,
// to float fields. Integer fields take no transforms (as `dtlc check` says).
struct Transform {
  char op;
  double value;
};

struct FieldSpec {
  std::string name;                 // the model input it feeds
  std::string source;               // idx csv npy safetensors text tokens synthetic
  std::string path;                 // resolved absolute path ("" for synthetic)
  CsvOptions csv;                   // csv only
  std::string key;                  // safetensors key
  int64_t seq = 0;                  // text / tokens window
  std::string token_dtype = "u16";  // tokens: u16 u32 i32
  std::string field_of_multi;       // text/tokens: "tokens" or "targets" ("" = use `name`)
  std::vector<Transform> transforms;
  std::vector<int64_t> sample_dims;  // the model input's dims after `batch` (row-major)
  bool integer = false;              // the model input is i32 (ids, labels): stored as int32
  int64_t int_range = 0;             // synthetic integer fields: values in [0, int_range); 0 → 2
  uint64_t seed = 0;                 // synthetic seed
};

// One per-rank micro-batch: name → [batch, sample elements...] row-major.
struct Batch {
  std::map<std::string, std::vector<float>> floats;
  std::map<std::string, std::vector<int32_t>> ints;
  int64_t epoch = 0, step_in_epoch = 0;
  std::vector<int64_t> indices;  // the dataset sample in each slot
};

struct Status {
  bool ok = true;
  std::string message;  // "field 'image': /d/x.idx.gz: gzip data ends early (the file is truncated)"
  static Status error(std::string m) { return {false, std::move(m)}; }
};

// Samples of an all-synthetic split (per epoch). A synthetic field in a split
// that also reads files takes the files' sample count instead.
constexpr int64_t kSyntheticSamples = int64_t{1} << 20;

// All fields of one split, read fully into memory (datasets here are small).
//
// Sources: idx (u8 i8 i16 i32 f32 f64, big-endian, plain or gzip); npy and
// safetensors (every dtype their probes accept; f16, bf16 and f8 convert to
// float exactly); csv (the probe's parsing rules); text (the file's bytes) and
// tokens (u16/u32/i32 little-endian): window i is elements [i*seq, i*seq+seq],
// tokens = its first seq, targets = its last seq.
//
// synthetic: every value comes from a counter-based RNG keyed by (seed, field
// name, sample, element), so any sample can be regenerated alone:
//  - float fields ~ N(0, 1);
//  - if the split has float fields (of any source), each integer synthetic
//    field is labelled by a fixed random linear teacher: with x the sample's
//    float fields concatenated in field order (D values), z = P·x (P: 16×D,
//    N(0, 1/D)) and label element j = argmax_c (A · rotate(z, j))_c over
//    c in [0, int_range) (A: int_range×16, N(0, 1)); P and A come from the
//    label field's seed. W = A·P is a rank-≤16 linear map, so a linear model
//    can fit the labels exactly, and a label costs 16·(D + int_range).
//  - otherwise (language modelling) the first integer field whose role
//    (field_of_multi, else name) is not "targets" is the input; if synthetic
//    it is uniform in [0, int_range). Every other integer synthetic field is
//    derived from it: targets[t] = (tokens[t mod n] * 7 + 3) mod int_range
//    (n = the input's elements), a map a model can learn.
// Synthetic values are the same bits on every x86-64 CPU and libm (Box–Muller
// with dtl's own f32 log, sin and cos: box_muller.h); the epoch order is
// integer-only and fully portable.
class Dataset {
 public:
  // Errors name the field and the file; every field of the split must have the
  // same sample count and exactly prod(sample_dims) elements per sample.
  static Status open(const std::vector<FieldSpec>& fields, Dataset& out);

  int64_t samples() const;
  const std::vector<FieldSpec>& fields() const;
  // Writes sample `index` (in [0, samples()); aborts otherwise) into slot
  // `slot` of every field, growing the vectors to at least (slot + 1) samples.
  // Thread-safe: many threads may copy from one Dataset.
  void copySample(int64_t index, Batch& into, int64_t slot) const;
  // Asks the CPU to start reading sample `index`'s bytes (no effect on any
  // value): a shuffled batch's samples are far apart, and each copy would
  // otherwise wait on memory (see Loader::produce).
  void prefetchSample(int64_t index) const;
  // A batch with room for `batch` samples of every field.
  Batch makeBatch(int64_t batch) const;
  // Whether `b` has exactly makeBatch(batch)'s fields and sizes.
  bool holdsBatch(const Batch& b, int64_t batch) const;

  struct Impl;

 private:
  std::shared_ptr<const Impl> impl_;  // shared: copies are cheap and a Loader keeps its own
};

struct LoaderOptions {
  int64_t batch = 1;  // per rank
  int rank = 0, world = 1;
  bool shuffle = true;
  uint64_t seed = 0;
  int prefetch = 2;  // batches queued ahead by the loader thread; 0 = load inside next()
};

// The order of epoch `epoch`: a Fisher–Yates permutation of [0, samples) driven
// by splitmix64 seeded from (seed, epoch), identical on every platform.
std::vector<int64_t> epochOrder(int64_t samples, uint64_t seed, int64_t epoch);

// Global batch g of an epoch covers order positions [g·B·W, (g+1)·B·W); rank r
// gets [g·B·W + r·B, g·B·W + (r+1)·B). So W ranks with batch b see exactly the
// samples one rank with batch W·b sees. A short last global batch is dropped.
class Loader {
 public:
  Loader(const Dataset& ds, LoaderOptions opt);  // keeps the dataset alive
  ~Loader();                                     // stops and joins the thread
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // Not ok when the options cannot work (batch < 1, rank outside the world,
  // fewer samples than one global batch); next() must not be called then.
  const Status& status() const { return status_; }
  int64_t stepsPerEpoch() const { return steps_; }  // floor(samples / (batch·world))

  // The batch at cursor(), then advances (crossing into the next epoch).
  Batch next();
  // Hands a batch next() returned back once the caller is done with it: the
  // loader fills its buffers again rather than new ones (a fresh batch is
  // zeroed and first-touched page by page; a recycled one is overwritten in
  // place). Optional: a batch not given back is just freed, and so is one
  // that is not this loader's shape.
  void recycle(Batch&& b);
  // (epoch, step_in_epoch) of the batch next() returns; seek() to it later
  // reproduces the same batches. seek() takes any step ≥ 0 (a step past the
  // epoch carries into later epochs, so seek(0, global_step) also works).
  std::pair<int64_t, int64_t> cursor() const { return {epoch_, step_}; }
  void seek(int64_t epoch, int64_t step_in_epoch);

 private:
  Batch produce(int64_t epoch, int64_t step);  // one batch; pure in (epoch, step)
  Batch emptyBatch();                          // a recycled one, else a new one
  void run();                                  // the prefetch thread
  void stop();

  Dataset ds_;
  LoaderOptions opt_;
  Status status_;
  int64_t steps_ = 0;
  int64_t epoch_ = 0, step_ = 0;  // consumer cursor
  // Producer side (the thread, or next() when prefetch = 0).
  int64_t prod_epoch_ = 0, prod_step_ = 0;
  int64_t order_epoch_ = -1;
  std::vector<int64_t> order_;
  // Prefetch queue.
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable ready_, space_;
  std::deque<Batch> queue_;
  std::vector<Batch> spares_;  // recycle()d; capacity prefetch + 1, never exceeded
  std::exception_ptr failure_;
  bool stop_ = false;
};

}  // namespace dtl::rt::data
