// Single-threaded GFLOP/s of a CBLAS sgemm at the products rlx's CPU backend
// runs for MiniLM-L6 and BERT-base (row-major, weights transposed: C = A B^T),
// from any shared library, loaded by path, whose symbols may carry a prefix.
// Used to choose the CPU GEMM library (docs/PERF.md). Not part of the build:
//   g++ -O2 -std=c++20 bench/cpu_gemm_shapes.cc -o /tmp/gemm_shapes -ldl
//   /tmp/gemm_shapes .deps/scipy-openblas32/lib/libscipy_openblas.so scipy_
//   /tmp/gemm_shapes /usr/lib/x86_64-linux-gnu/libopenblas.so.0
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

using Sgemm = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*,
                       int);
using SetThreads = void (*)(int);
constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s LIBRARY.so [SYMBOL_PREFIX]\n", argv[0]);
    return 2;
  }
  const std::string prefix = argc > 2 ? argv[2] : "";
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    std::fprintf(stderr, "%s\n", dlerror());
    return 1;
  }
  auto sgemm = reinterpret_cast<Sgemm>(dlsym(lib, (prefix + "cblas_sgemm").c_str()));
  if (!sgemm) {
    std::fprintf(stderr, "%s: no %scblas_sgemm\n", argv[1], prefix.c_str());
    return 1;
  }
  for (const char* name : {"openblas_set_num_threads", "bli_thread_set_num_threads"})
    if (auto set = reinterpret_cast<SetThreads>(dlsym(lib, (prefix + name).c_str()))) set(1);
  struct Shape {
    const char* what;
    int m, n, k;
  };
  const Shape shapes[] = {{"MiniLM QKV b1", 128, 1152, 384},   {"MiniLM out b1", 128, 384, 384},
                          {"MiniLM ffn_in b1", 128, 1536, 384}, {"MiniLM ffn_out b1", 128, 384, 1536},
                          {"MiniLM ffn_in b32", 4096, 1536, 384}, {"BERT QKV b1", 128, 2304, 768},
                          {"BERT ffn_in b1", 128, 3072, 768},   {"BERT ffn_out b1", 128, 768, 3072}};
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1, 1);
  for (const Shape& s : shapes) {
    std::vector<float> a(size_t(s.m) * s.k), b(size_t(s.n) * s.k), c(size_t(s.m) * s.n);
    for (auto& x : a) x = u(rng);
    for (auto& x : b) x = u(rng);
    std::vector<double> gflops;
    for (int rep = 0; rep < 15; ++rep) {
      auto t0 = std::chrono::steady_clock::now();
      sgemm(kRowMajor, kNoTrans, kTrans, s.m, s.n, s.k, 1.f, a.data(), s.k, b.data(), s.k, 0.f, c.data(), s.n);
      double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      gflops.push_back(2.0 * s.m * s.n * s.k / sec / 1e9);
    }
    std::sort(gflops.begin(), gflops.end());
    std::printf("%-20s %5d x %5d x %5d  median %6.1f GFLOP/s  best %6.1f\n", s.what, s.m, s.n, s.k, gflops[7],
                gflops.back());
  }
}
