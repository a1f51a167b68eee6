// Loader: the per-epoch sample order, each rank's slice of a global batch,
// and the prefetch thread. A batch is a pure function of (epoch, step), so a
// prefetching run, a synchronous run and a resumed run hand out the same data.
#include "runtime/data/loader.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <numeric>

#include "runtime/data/loader_random.h"

namespace dtl::rt::data {

namespace {

constexpr uint64_t kShuffleStream = 0x5eed0f0de7ULL;
// How many samples ahead of the copy their bytes are prefetched: enough to
// cover a DRAM miss while the samples before are copied.
constexpr int64_t kPrefetchSamples = 4;

[[noreturn]] void broken(const char* what, int64_t a, int64_t b) {
  std::fprintf(stderr, "%s:%d: check failed: %s (%lld, %lld)\n", __FILE__, __LINE__, what, static_cast<long long>(a),
               static_cast<long long>(b));
  std::abort();
}

void advance(int64_t& epoch, int64_t& step, int64_t steps) {
  if (++step == steps) {
    step = 0;
    ++epoch;
  }
}

}  // namespace

std::vector<int64_t> epochOrder(int64_t samples, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> order(static_cast<size_t>(samples));
  std::iota(order.begin(), order.end(), int64_t{0});
  detail::SplitMix64 rng(detail::hashKey(seed, static_cast<uint64_t>(epoch), kShuffleStream));
  for (int64_t i = samples - 1; i > 0; --i) {  // Fisher–Yates
    auto j = static_cast<int64_t>(rng.below(static_cast<uint64_t>(i) + 1));
    std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
  }
  return order;
}

Loader::Loader(const Dataset& ds, LoaderOptions opt) : ds_(ds), opt_(opt) {
  int64_t global = 0;
  if (ds_.samples() <= 0) {
    status_ = Status::error("the dataset is not open (Dataset::open failed or was not called)");
  } else if (opt_.batch < 1) {
    status_ = Status::error("batch is " + std::to_string(opt_.batch) + "; it must be at least 1");
  } else if (opt_.world < 1 || opt_.rank < 0 || opt_.rank >= opt_.world) {
    status_ = Status::error("rank " + std::to_string(opt_.rank) + " is outside a world of " +
                            std::to_string(opt_.world) + " ranks");
  } else if (__builtin_mul_overflow(opt_.batch, int64_t{opt_.world}, &global) || global > ds_.samples()) {
    status_ =
        Status::error("the split has " + std::to_string(ds_.samples()) + " samples, fewer than one global batch of " +
                      (global > 0 ? std::to_string(global) : std::string("more than 2^63")) + " (batch " +
                      std::to_string(opt_.batch) + " × " + std::to_string(opt_.world) +
                      " ranks); the short last batch is dropped, so no step could run");
  } else {
    steps_ = ds_.samples() / global;
    spares_.reserve(static_cast<size_t>(std::max(opt_.prefetch, 0)) + 1);  // recycle() never allocates
  }
}

Loader::~Loader() { stop(); }

Batch Loader::produce(int64_t epoch, int64_t step) {
  if (opt_.shuffle && order_epoch_ != epoch) {
    order_ = epochOrder(ds_.samples(), opt_.seed, epoch);
    order_epoch_ = epoch;
  }
  Batch b = emptyBatch();
  b.epoch = epoch;
  b.step_in_epoch = step;
  b.indices.resize(static_cast<size_t>(opt_.batch));
  int64_t start = (step * opt_.world + opt_.rank) * opt_.batch;  // order position of this rank's slot 0
  auto indexAt = [&](int64_t slot) { return opt_.shuffle ? order_[static_cast<size_t>(start + slot)] : start + slot; };
  for (int64_t slot = 0; slot < std::min(kPrefetchSamples, opt_.batch); ++slot) ds_.prefetchSample(indexAt(slot));
  for (int64_t slot = 0; slot < opt_.batch; ++slot) {
    if (slot + kPrefetchSamples < opt_.batch) ds_.prefetchSample(indexAt(slot + kPrefetchSamples));
    int64_t index = indexAt(slot);
    b.indices[static_cast<size_t>(slot)] = index;
    ds_.copySample(index, b, slot);
  }
  return b;
}

Batch Loader::emptyBatch() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!spares_.empty()) {
      Batch b = std::move(spares_.back());
      spares_.pop_back();
      return b;  // every slot of every field is written over by produce()
    }
  }
  return ds_.makeBatch(opt_.batch);
}

void Loader::recycle(Batch&& b) {
  if (!status_.ok || !ds_.holdsBatch(b, opt_.batch)) return;  // another loader's, or grown since: freed
  std::lock_guard<std::mutex> lock(mu_);
  if (spares_.size() < spares_.capacity()) spares_.push_back(std::move(b));
}

void Loader::run() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      space_.wait(lock, [&] { return stop_ || static_cast<int>(queue_.size()) < opt_.prefetch; });
      if (stop_) return;
    }
    Batch b;
    try {
      b = produce(prod_epoch_, prod_step_);
    } catch (...) {  // bad_alloc: handed to next(), which rethrows it on the caller's thread
      std::lock_guard<std::mutex> lock(mu_);
      failure_ = std::current_exception();
      ready_.notify_one();
      return;
    }
    advance(prod_epoch_, prod_step_, steps_);
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(b));
    }
    ready_.notify_one();
  }
}

Batch Loader::next() {
  if (!status_.ok) broken("next() on a loader whose status() is an error", opt_.batch, opt_.world);
  if (opt_.prefetch <= 0) {
    Batch b = produce(epoch_, step_);
    advance(epoch_, step_, steps_);
    return b;
  }
  if (!thread_.joinable()) {  // first call, or the first after seek()
    prod_epoch_ = epoch_;
    prod_step_ = step_;
    thread_ = std::thread(&Loader::run, this);
  }
  std::unique_lock<std::mutex> lock(mu_);
  ready_.wait(lock, [&] { return !queue_.empty() || failure_; });
  if (queue_.empty()) {
    std::exception_ptr failure = failure_;
    lock.unlock();
    stop();  // the thread has exited; a later next() starts a fresh one at the same cursor
    std::rethrow_exception(failure);
  }
  Batch b = std::move(queue_.front());
  queue_.pop_front();
  lock.unlock();
  space_.notify_one();
  epoch_ = b.epoch;
  step_ = b.step_in_epoch;
  advance(epoch_, step_, steps_);
  return b;
}

void Loader::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  space_.notify_all();
  if (thread_.joinable()) thread_.join();
  queue_.clear();
  failure_ = nullptr;
  stop_ = false;
}

void Loader::seek(int64_t epoch, int64_t step_in_epoch) {
  if (epoch < 0 || step_in_epoch < 0) broken("seek to a non-negative (epoch, step)", epoch, step_in_epoch);
  stop();
  epoch_ = steps_ > 0 ? epoch + step_in_epoch / steps_ : epoch;
  step_ = steps_ > 0 ? step_in_epoch % steps_ : step_in_epoch;
}

}  // namespace dtl::rt::data
