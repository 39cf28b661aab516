// The CPU backend's one thread pool. Kernels split their work with
// parallel_for; matrix products call the BLAS single-threaded inside it, so
// no second pool ever competes for the cores.
//
// Idle workers spin for ~50 us, then sleep on a futex. OpenMP's default
// (libgomp spins for ~300000 iterations) made 2-thread forwards up to 10x
// slower than 1 thread whenever other processes loaded the cores: a spinning
// waiter shared a core with the thread it was waiting for.
#pragma once
#include <cstdint>
#include <type_traits>

namespace rlx::cpu {

// Threads for the current run: the executable's count (cpu_backend.cc sets it
// for the run as the OpenMP thread count).
int run_threads();

// Calls body(begin, end, worker) over contiguous chunks covering [0, n), on up
// to `threads` threads (the caller is worker 0, workers < threads). Chunks are
// handed out dynamically, a few per thread, so a descheduled thread delays
// the rest by at most one chunk. One job at a time: concurrent callers wait.
void parallel_chunks(int64_t n, int threads, void (*call)(void*, int64_t, int64_t, int), void* ctx);

template <class F> void parallel_ranges(int64_t n, int threads, F&& body) {
  using Body = std::remove_reference_t<F>;
  parallel_chunks(
      n, threads,
      [](void* c, int64_t lo, int64_t hi, int w) { (*static_cast<Body*>(c))(lo, hi, w); },
      const_cast<void*>(static_cast<const void*>(&body)));
}

// body(i) for i in [0, n), on the run's threads when `threaded` (the work is
// worth waking them for), else on the caller.
template <class F> void parallel_for(int64_t n, bool threaded, F&& body) {
  parallel_ranges(n, threaded ? run_threads() : 1, [&](int64_t lo, int64_t hi, int) {
    for (int64_t i = lo; i < hi; ++i) body(i);
  });
}

// body(i, worker) for i in [0, n) on `threads` threads; worker < threads
// indexes per-thread scratch.
template <class F> void parallel_for_worker(int64_t n, int threads, F&& body) {
  parallel_ranges(n, threads, [&](int64_t lo, int64_t hi, int worker) {
    for (int64_t i = lo; i < hi; ++i) body(i, worker);
  });
}

}  // namespace rlx::cpu
