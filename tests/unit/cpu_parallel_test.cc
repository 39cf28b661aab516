// The CPU backend's thread pool: every index exactly once, worker indices in
// range, nested calls on the caller's thread, many jobs back to back, and the
// default thread count.
#include <gtest/gtest.h>
#include <omp.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "backends/cpu/cpu_parallel.h"
#include "backends/cpu/cpu_threads.h"

namespace rlx::cpu {
namespace {

TEST(CpuParallel, EveryIndexOnceOnWorkersInRange) {
  for (int threads : {1, 2, 3, 5})
    for (int64_t n : {int64_t(1), int64_t(2), int64_t(7), int64_t(1001)}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      std::atomic<int> bad_worker{0};
      std::vector<std::atomic<int>> by_worker(static_cast<size_t>(threads));
      parallel_ranges(n, threads, [&](int64_t lo, int64_t hi, int w) {
        if (w < 0 || w >= threads) ++bad_worker;
        else by_worker[size_t(w)] += int(hi - lo);
        for (int64_t i = lo; i < hi; ++i) ++hits[size_t(i)];
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[size_t(i)], 1) << "index " << i << ", " << threads << " threads";
      EXPECT_EQ(bad_worker, 0);
      int total = 0;
      for (auto& c : by_worker) total += c;
      EXPECT_EQ(total, n);
    }
}

TEST(CpuParallel, NestedCallsRunOnTheCallersThread) {
  std::atomic<int> inner_total{0}, inner_off_thread{0};
  std::atomic<int> outer_on_workers{0};
  parallel_ranges(8, 3, [&](int64_t lo, int64_t hi, int w) {
    // Slow enough that the workers wake and take chunks too.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (w != 0) ++outer_on_workers;
    for (int64_t i = lo; i < hi; ++i) {
      const auto me = std::this_thread::get_id();
      parallel_ranges(5, 3, [&](int64_t a, int64_t b, int w) {
        if (std::this_thread::get_id() != me || w != 0) ++inner_off_thread;
        inner_total += int(b - a);
      });
    }
  });
  EXPECT_GT(outer_on_workers, 0) << "no chunk ran on a worker: the nested calls there were not tested";
  EXPECT_EQ(inner_total, 8 * 5);
  EXPECT_EQ(inner_off_thread, 0);
}

TEST(CpuParallel, ManyJobsBackToBackAndFromSeveralCallers) {
  std::atomic<int64_t> sum{0};
  auto work = [&] {
    for (int job = 0; job < 300; ++job)
      parallel_ranges(37, 2, [&](int64_t lo, int64_t hi, int) {
        for (int64_t i = lo; i < hi; ++i) sum += i;
      });
  };
  std::thread other(work);
  work();
  other.join();
  EXPECT_EQ(sum, 2 * 300 * (36 * 37 / 2));
}

TEST(CpuParallel, DefaultThreadsArePhysicalCoresWithinTheProcessors) {
  const int n = default_threads();
  EXPECT_GE(n, 1);
  EXPECT_LE(n, omp_get_num_procs());
}

}  // namespace
}  // namespace rlx::cpu
