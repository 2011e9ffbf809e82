#include "ThreadPool.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define POPSNN_PAUSE() _mm_pause()
#else
#define POPSNN_PAUSE() std::this_thread::yield()
#endif

namespace poplar {
namespace detail {

namespace {

// Threads spin this long for the next compute set before sleeping: programs
// run compute sets back to back, and a futex wake costs more than most of them.
// On a quiet machine this made a DSNN training step ~20% faster than sleeping
// at once; POPSNN_NUM_THREADS=1 avoids the spinning on a crowded one.
constexpr auto kSpin = std::chrono::microseconds(50);

template <typename Ready> bool spinUntil(Ready ready) {
  const auto deadline = std::chrono::steady_clock::now() + kSpin;
  for (unsigned i = 1;; ++i) {
    if (ready())
      return true;
    POPSNN_PAUSE();
    if ((i & 63) == 0 && std::chrono::steady_clock::now() > deadline)
      return false;
  }
}

// A thread's share of a loop's tasks, [front, back) packed in one word: its owner takes
// from the front, a thread that has run out of its own takes from the back.
struct alignas(64) Share {
  std::atomic<std::uint64_t> range{0};
};
constexpr std::uint64_t pack(std::uint64_t front, std::uint64_t back) { return back << 32 | front; }

// Tasks (a compute set's chunks of whole tiles) go to the same thread every loop -- chunk
// k of n to thread k * threads / n -- so a tile's data stays in one core's cache from one
// compute set to the next; a thread whose share is done takes what another has not
// started. The caller returns once every task has run: a worker that wakes late for a
// loop whose tasks the others have already taken is not waited for.
class Pool {
public:
  explicit Pool(unsigned threads) : shares_(threads) {
    for (unsigned i = 1; i < threads; ++i)
      workers_.emplace_back([this, i] { loop(i); });
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(m_);
      stop_ = true;
      generation_.fetch_add(1);
    }
    wake_.notify_all();
    for (auto &t : workers_)
      t.join();
  }
  unsigned size() const { return static_cast<unsigned>(shares_.size()); }

  void run(std::size_t n, TaskFn fn, void *ctx) {
    std::lock_guard<std::mutex> serial(runMutex_); // one parallel loop at a time
    // The previous loop's tasks have all run, so no thread reads these until the shares
    // below hand out this loop's tasks.
    fn_ = fn;
    ctx_ = ctx;
    size_ = n;
    error_ = nullptr;
    done_.store(0, std::memory_order_relaxed);
    const std::size_t threads = shares_.size();
    for (std::size_t t = 0; t < threads; ++t)
      shares_[t].range.store(pack(n * t / threads, n * (t + 1) / threads),
                             std::memory_order_release);
    {
      // Under the lock, so that a worker about to sleep sees the new generation.
      std::lock_guard<std::mutex> lock(m_);
      generation_.fetch_add(1, std::memory_order_release);
    }
    wake_.notify_all();
    work(0);
    auto finished = [&] { return done_.load(std::memory_order_acquire) == n; };
    if (!spinUntil(finished)) {
      std::unique_lock<std::mutex> lock(m_);
      waiting_ = true;
      done_cv_.wait(lock, finished);
      waiting_ = false;
    }
    if (error_)
      std::rethrow_exception(error_);
  }

private:
  // Claims a task of share s: from the front (own share) or the back (another's).
  static bool claim(Share &s, bool own, std::size_t &task) {
    std::uint64_t r = s.range.load(std::memory_order_acquire);
    for (;;) {
      const std::uint64_t front = r & 0xFFFFFFFFu, back = r >> 32;
      if (front >= back)
        return false;
      const std::uint64_t next = own ? pack(front + 1, back) : pack(front, back - 1);
      if (s.range.compare_exchange_weak(r, next, std::memory_order_acq_rel,
                                        std::memory_order_acquire)) {
        task = own ? front : back - 1;
        return true;
      }
    }
  }
  void runTask(std::size_t i) {
    // Read before the count below: the loop can end (and the next one set size_) once
    // every task is counted.
    const std::size_t n = size_;
    try {
      fn_(ctx_, i);
    } catch (...) {
      std::lock_guard<std::mutex> lock(m_);
      if (!error_)
        error_ = std::current_exception();
    }
    if (done_.fetch_add(1, std::memory_order_acq_rel) + 1 == n) {
      std::lock_guard<std::mutex> lock(m_);
      if (waiting_)
        done_cv_.notify_one();
    }
  }
  void work(std::size_t self) {
    const std::size_t threads = shares_.size();
    std::size_t task;
    while (claim(shares_[self], true, task))
      runTask(task);
    for (std::size_t k = 1; k < threads; ++k) {
      Share &other = shares_[(self + k) % threads];
      while (claim(other, false, task))
        runTask(task);
    }
  }
  void loop(std::size_t self) {
    std::uint64_t seen = 0;
    for (;;) {
      auto changed = [&] { return generation_.load(std::memory_order_acquire) != seen; };
      if (!spinUntil(changed)) {
        std::unique_lock<std::mutex> lock(m_);
        wake_.wait(lock, changed);
      }
      seen = generation_.load(std::memory_order_acquire);
      {
        std::lock_guard<std::mutex> lock(m_);
        if (stop_)
          return;
      }
      work(self);
    }
  }

  std::vector<Share> shares_;
  std::vector<std::thread> workers_;
  std::mutex m_, runMutex_;
  std::condition_variable wake_, done_cv_;
  std::atomic<std::uint64_t> generation_{0};
  bool stop_ = false, waiting_ = false;
  TaskFn fn_ = nullptr;
  void *ctx_ = nullptr;
  std::size_t size_ = 0;
  std::atomic<std::size_t> done_{0};
  std::exception_ptr error_;
};

unsigned configuredThreads() {
  if (const char *env = std::getenv("POPSNN_NUM_THREADS")) {
    long v = std::strtol(env, nullptr, 10);
    if (v > 0 && v <= 1024)
      return static_cast<unsigned>(v);
  }
  unsigned hw = std::thread::hardware_concurrency();
  return hw ? hw : 1;
}

Pool &pool() {
  static Pool p(configuredThreads());
  return p;
}

} // namespace

unsigned poolThreads() { return pool().size(); }

void parallelFor(std::size_t n, TaskFn fn, void *context) {
  if (n == 0)
    return;
  // n >= 2^32 does not fit a share's word (a compute set has a few chunks per thread).
  if (n == 1 || poolThreads() == 1 || (n >> 32) != 0) {
    for (std::size_t i = 0; i < n; ++i)
      fn(context, i);
    return;
  }
  pool().run(n, fn, context);
}

} // namespace detail
} // namespace poplar
