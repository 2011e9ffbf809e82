#include "ThreadPool.hpp"

#include <atomic>
#include <cstdint>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace poplar {
namespace detail {

namespace {

class Pool {
public:
  explicit Pool(unsigned threads) {
    for (unsigned i = 1; i < threads; ++i) workers_.emplace_back([this] { loop(); });
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(m_);
      stop_ = true;
      ++generation_;
    }
    cv_.notify_all();
    for (auto &t : workers_) t.join();
  }
  unsigned size() const { return static_cast<unsigned>(workers_.size()) + 1; }

  void run(std::size_t n, TaskFn fn, void *ctx) {
    std::lock_guard<std::mutex> serial(runMutex_); // one parallel loop at a time
    {
      std::lock_guard<std::mutex> lock(m_);
      fn_ = fn;
      ctx_ = ctx;
      n_ = n;
      next_.store(0);
      busy_ = static_cast<unsigned>(workers_.size());
      error_ = nullptr;
      ++generation_;
    }
    cv_.notify_all();
    work();
    std::unique_lock<std::mutex> lock(m_);
    done_.wait(lock, [this] { return busy_ == 0; });
    if (error_) std::rethrow_exception(error_);
  }

private:
  void work() {
    for (;;) {
      std::size_t i = next_.fetch_add(1);
      if (i >= n_) return;
      try {
        fn_(ctx_, i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(m_);
        if (!error_) error_ = std::current_exception();
      }
    }
  }
  void loop() {
    std::uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(m_);
        cv_.wait(lock, [&] { return generation_ != seen; });
        seen = generation_;
        if (stop_) return;
      }
      work();
      std::lock_guard<std::mutex> lock(m_);
      if (--busy_ == 0) done_.notify_one();
    }
  }

  std::vector<std::thread> workers_;
  std::mutex m_, runMutex_;
  std::condition_variable cv_, done_;
  std::uint64_t generation_ = 0;
  bool stop_ = false;
  TaskFn fn_ = nullptr;
  void *ctx_ = nullptr;
  std::size_t n_ = 0;
  std::atomic<std::size_t> next_{0};
  unsigned busy_ = 0;
  std::exception_ptr error_;
};

unsigned configuredThreads() {
  if (const char *env = std::getenv("POPSNN_NUM_THREADS")) {
    long v = std::strtol(env, nullptr, 10);
    if (v > 0 && v <= 1024) return static_cast<unsigned>(v);
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
  if (n == 0) return;
  if (n == 1 || poolThreads() == 1) {
    for (std::size_t i = 0; i < n; ++i) fn(context, i);
    return;
  }
  pool().run(n, fn, context);
}

} // namespace detail
} // namespace poplar
