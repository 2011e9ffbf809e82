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

class Pool {
public:
  explicit Pool(unsigned threads) {
    for (unsigned i = 1; i < threads; ++i)
      workers_.emplace_back([this] { loop(); });
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
  unsigned size() const { return static_cast<unsigned>(workers_.size()) + 1; }

  void run(std::size_t n, TaskFn fn, void *ctx) {
    std::lock_guard<std::mutex> serial(runMutex_); // one parallel loop at a time
    fn_ = fn;
    ctx_ = ctx;
    n_ = n;
    next_.store(0, std::memory_order_relaxed);
    error_ = nullptr;
    busy_.store(static_cast<unsigned>(workers_.size()), std::memory_order_relaxed);
    {
      // Under the lock, so that a worker about to sleep sees the new generation.
      std::lock_guard<std::mutex> lock(m_);
      generation_.fetch_add(1, std::memory_order_release);
    }
    wake_.notify_all();
    work();
    if (!spinUntil([this] { return busy_.load(std::memory_order_acquire) == 0; })) {
      std::unique_lock<std::mutex> lock(m_);
      done_.wait(lock, [this] { return busy_.load(std::memory_order_acquire) == 0; });
    }
    if (error_)
      std::rethrow_exception(error_);
  }

private:
  void work() {
    for (;;) {
      std::size_t i = next_.fetch_add(1, std::memory_order_relaxed);
      if (i >= n_)
        return;
      try {
        fn_(ctx_, i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(m_);
        if (!error_)
          error_ = std::current_exception();
      }
    }
  }
  void loop() {
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
      work();
      if (busy_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard<std::mutex> lock(m_);
        done_.notify_one();
      }
    }
  }

  std::vector<std::thread> workers_;
  std::mutex m_, runMutex_;
  std::condition_variable wake_, done_;
  std::atomic<std::uint64_t> generation_{0};
  bool stop_ = false;
  TaskFn fn_ = nullptr;
  void *ctx_ = nullptr;
  std::size_t n_ = 0;
  std::atomic<std::size_t> next_{0};
  std::atomic<unsigned> busy_{0};
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
  if (n == 1 || poolThreads() == 1) {
    for (std::size_t i = 0; i < n; ++i)
      fn(context, i);
    return;
  }
  pool().run(n, fn, context);
}

} // namespace detail
} // namespace poplar
