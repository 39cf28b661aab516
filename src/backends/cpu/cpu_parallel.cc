#include "backends/cpu/cpu_parallel.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#define RLX_PAUSE() _mm_pause()
#else
#define RLX_PAUSE() ((void)0)
#endif

namespace rlx::cpu {
namespace {

// Spins while pred() holds for up to ~50 us, then sleeps on `word` until it
// changes from `seen` (re-checking pred after every wake).
template <class Pred> void wait_while(std::atomic<uint64_t>& word, uint64_t seen, Pred pred) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(50);
  for (int i = 0; pred(); ++i) {
    RLX_PAUSE();
    if ((i & 255) == 255 && std::chrono::steady_clock::now() > until) {
      while (pred()) word.wait(seen, std::memory_order_acquire);
      return;
    }
  }
}

class Pool {
 public:
  ~Pool() {
    stop_ = true;
    for (auto& w : workers_) {
      w->go.fetch_add(1, std::memory_order_release);
      w->go.notify_one();
    }
    for (auto& w : workers_) w->thread.join();
  }

  void run(int64_t n, int threads, void (*call)(void*, int64_t, int64_t, int), void* ctx) {
    std::lock_guard<std::mutex> lock(mutex_);
    // A few chunks per thread: dynamic hand-out absorbs a descheduled thread.
    const int64_t chunks = std::min<int64_t>(n, int64_t(threads) * 4);
    const int helpers = int(std::min<int64_t>(threads, chunks)) - 1;
    while (int(workers_.size()) < helpers) start_worker(int(workers_.size()) + 1);
    call_ = call, ctx_ = ctx, n_ = n, chunks_ = chunks;
    next_.store(0, std::memory_order_relaxed);
    ++job_;
    for (int w = 0; w < helpers; ++w) {
      workers_[size_t(w)]->go.store(job_, std::memory_order_release);
      workers_[size_t(w)]->go.notify_one();
    }
    work(0);
    for (int w = 0; w < helpers; ++w) {
      auto& done = workers_[size_t(w)]->done;
      const uint64_t job = job_;
      wait_while(done, done.load(std::memory_order_acquire),
                 [&] { return done.load(std::memory_order_acquire) != job; });
    }
  }

 private:
  struct alignas(64) Worker {
    std::atomic<uint64_t> go{0}, done{0};
    std::thread thread;
  };

  void work(int worker) {
    for (int64_t c; (c = next_.fetch_add(1, std::memory_order_relaxed)) < chunks_;)
      call_(ctx_, n_ * c / chunks_, n_ * (c + 1) / chunks_, worker);
  }

  void start_worker(int index) {
    workers_.push_back(std::make_unique<Worker>());
    Worker* w = workers_.back().get();
    w->thread = std::thread([this, w, index] {
      uint64_t seen = 0;
      for (;;) {
        wait_while(w->go, seen, [&] { return w->go.load(std::memory_order_acquire) == seen; });
        seen = w->go.load(std::memory_order_acquire);
        if (stop_) return;
        work(index);
        w->done.store(seen, std::memory_order_release);
        w->done.notify_one();
      }
    });
  }

  std::mutex mutex_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::atomic<bool> stop_{false};
  uint64_t job_ = 0;
  void (*call_)(void*, int64_t, int64_t, int) = nullptr;
  void* ctx_ = nullptr;
  int64_t n_ = 0, chunks_ = 0;
  std::atomic<int64_t> next_{0};
};

Pool& pool() {
  static Pool p;
  return p;
}

}  // namespace

int run_threads() { return std::max(1, omp_get_max_threads()); }

void parallel_chunks(int64_t n, int threads, void (*call)(void*, int64_t, int64_t, int), void* ctx) {
  thread_local bool inside = false;  // a nested call runs on its caller's thread
  if (n <= 0) return;
  if (threads <= 1 || n == 1 || inside) {
    call(ctx, 0, n, 0);
    return;
  }
  inside = true;
  struct Reset {
    ~Reset() { inside = false; }
  } reset;
  pool().run(n, threads, call, ctx);
}

}  // namespace rlx::cpu
