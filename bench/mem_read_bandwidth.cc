// Streaming read bandwidth of one thread per core: sums a buffer of the given
// size (MiB) with AVX2/AVX-512 loads, best of several passes. Decode reads
// every weight once a token, so this bounds tokens/s at bytes read / token.
// Build: c++ -O2 -march=native -fopenmp bench/mem_read_bandwidth.cc
#include <immintrin.h>
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

int main(int argc, char** argv) {
  const size_t mib = argc > 1 ? size_t(std::atol(argv[1])) : 1024;
  const int threads = argc > 2 ? std::atoi(argv[2]) : 1;
  const size_t n = mib << 20;
  auto* buf = static_cast<unsigned char*>(std::aligned_alloc(64, n));
  std::memset(buf, 1, n);
  double best = 0;
  for (int pass = 0; pass < 7; ++pass) {
    const auto t0 = std::chrono::steady_clock::now();
    __m256i total = _mm256_setzero_si256();
#pragma omp parallel num_threads(threads)
    {
      __m256i acc0 = _mm256_setzero_si256(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
#pragma omp for schedule(static)
      for (size_t i = 0; i < n; i += 128) {
        acc0 = _mm256_add_epi64(acc0, _mm256_load_si256(reinterpret_cast<const __m256i*>(buf + i)));
        acc1 = _mm256_add_epi64(acc1, _mm256_load_si256(reinterpret_cast<const __m256i*>(buf + i + 32)));
        acc2 = _mm256_add_epi64(acc2, _mm256_load_si256(reinterpret_cast<const __m256i*>(buf + i + 64)));
        acc3 = _mm256_add_epi64(acc3, _mm256_load_si256(reinterpret_cast<const __m256i*>(buf + i + 96)));
      }
#pragma omp critical
      total = _mm256_add_epi64(total, _mm256_add_epi64(_mm256_add_epi64(acc0, acc1), _mm256_add_epi64(acc2, acc3)));
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (_mm256_extract_epi64(total, 0) == 42) std::puts("");  // keep the sum
    if (pass > 0 && n / s > best) best = double(n) / s;
  }
  std::printf("read %zu MiB, %d thread(s): %.2f GB/s\n", mib, threads, best / 1e9);
  std::free(buf);
}
