// The CPU backend's two GEMM paths at the products it runs for MiniLM-L6 and
// BERT-base (row-major, weights stored [N, K] as Hugging Face Linear layers
// store them: C = A B^T): the library (cpu_gemm.h, one single-threaded call
// per slice, so it re-packs the weights on every call) against the packed
// kernel over weights packed once (cpu_gemm_packed.h). In one process,
// alternating the two call by call; first on one thread timed by the
// thread's CPU time (CLOCK_THREAD_CPUTIME_ID: other processes on the cores
// do not count), then on two threads of the backend's pool by wall clock.
// Prints median GFLOP/s of each and packed / library. Decides
// packed_gemm_wins (docs/PERF.md). Built on request:
//   ninja -C build rlx_gemm_bench && build/rlx_gemm_bench [REPS] [M,M,...]
// (An earlier version of this file, in git history, compared BLAS libraries
// loaded by path; docs/PERF.md keeps its table.)
#include <omp.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/cpu_gemm.h"
#include "backends/cpu/cpu_gemm_packed.h"

namespace {

double thread_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  using namespace rlx::cpu;
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 21;
  std::vector<int> ms = {32, 128, 1024, 4096};
  if (argc > 2) {
    ms.clear();
    for (std::string s = argv[2]; !s.empty();) {
      ms.push_back(std::atoi(s.c_str()));
      const size_t c = s.find(',');
      s = c == std::string::npos ? "" : s.substr(c + 1);
    }
  }
  if (!packed_gemm_available()) {
    std::fprintf(stderr, "this processor has no AVX-512F: the packed kernel does not run here\n");
    return 1;
  }
  struct Shape {
    const char* what;
    int n, k;
  };
  const Shape shapes[] = {{"MiniLM qkv", 1152, 384},  {"MiniLM out", 384, 384},  {"MiniLM ffn_in", 1536, 384},
                          {"MiniLM ffn_out", 384, 1536}, {"BERT qkv", 2304, 768}, {"BERT out", 768, 768},
                          {"BERT ffn_in", 3072, 768},  {"BERT ffn_out", 768, 3072}};
  std::printf("%s; median of %d calls each, alternating\n", gemm_library().c_str(), reps);
  std::printf("%-15s %5s %5s %5s | 1 thread, CPU time GFLOP/s: library packed ratio | 2 threads, wall: library "
              "packed ratio | max rel diff\n",
              "shape", "m", "n", "k");
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1, 1);
  for (int m : ms)
    for (const Shape& s : shapes) {
      std::vector<float> a(size_t(m) * s.k), b(size_t(s.n) * s.k), c_lib(size_t(m) * s.n), c_pk(size_t(m) * s.n);
      for (auto& x : a) x = u(rng);
      for (auto& x : b) x = u(rng);
      float* packed = static_cast<float*>(
          std::aligned_alloc(64, (size_t(packed_weights_floats(s.n, s.k)) * 4 + 63) / 64 * 64));
      pack_weights(b.data(), s.n, s.k, s.k, true, packed);
      const double flop = 2.0 * m * s.n * s.k;
      double res[2][2];  // [threads - 1][library, packed] median GFLOP/s
      for (int threads : {1, 2}) {
        omp_set_num_threads(threads);
        std::vector<double> t_lib, t_pk;
        for (int r = 0; r < reps + 1; ++r) {  // the first round warms up
          double t0 = threads == 1 ? thread_seconds() : wall_seconds();
          gemm_f32_sliced(false, true, m, s.n, s.k, a.data(), s.k, b.data(), s.k, c_lib.data(), s.n, nullptr,
                          rlx::Activation::None, threads);
          double t1 = threads == 1 ? thread_seconds() : wall_seconds();
          gemm_packed(false, m, s.n, s.k, a.data(), s.k, packed, c_pk.data(), s.n, nullptr, rlx::Activation::None,
                      threads);
          double t2 = threads == 1 ? thread_seconds() : wall_seconds();
          if (r > 0) t_lib.push_back(t1 - t0), t_pk.push_back(t2 - t1);
        }
        res[threads - 1][0] = flop / median(t_lib) / 1e9;
        res[threads - 1][1] = flop / median(t_pk) / 1e9;
      }
      double diff = 0;
      for (size_t i = 0; i < c_lib.size(); ++i)
        diff = std::max(diff, double(std::fabs(c_lib[i] - c_pk[i])) / (std::fabs(c_lib[i]) + 1.0));
      std::printf("%-15s %5d %5d %5d | %7.1f %7.1f %5.2fx | %7.1f %7.1f %5.2fx | %.1e\n", s.what, m, s.n, s.k,
                  res[0][0], res[0][1], res[0][1] / res[0][0], res[1][0], res[1][1], res[1][1] / res[1][0], diff);
      std::fflush(stdout);
      std::free(packed);
    }
}
