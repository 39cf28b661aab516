// The packed GEMM's int8 path (activations quantized per row, then VPDPBUSD
// over weights quantized per column) against its bf16 path (VDPBF16PS) at
// the products MiniLM-L6 and BERT-base run (C = A B^T, weights [N, K]), both
// with a GELU epilogue narrowed to bf16 as an encoder's FFN runs them. One
// thread, the thread's CPU time, alternating call by call; the int8 time
// includes quantizing A. Prints median GFLOP/s and int8 / bf16 speed, and
// how far each is from the f32 product (max |diff| / max |C|). Built on
// request: ninja -C build rlx_gemm_int8_bench && build/rlx_gemm_int8_bench [REPS] [M,M,...]
#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/cpu_gemm_packed.h"
#include "backends/cpu/cpu_int8_rows.h"
#include "backends/cpu/cpu_storage.h"

namespace {

double thread_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <class T> T* aligned(size_t n) { return static_cast<T*>(std::aligned_alloc(64, (n * sizeof(T) + 63) / 64 * 64)); }

}  // namespace

int main(int argc, char** argv) {
  using namespace rlx::cpu;
  using rlx::cpu::BFloat;
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 21;
  std::vector<int> ms = {32, 128, 1024};
  if (argc > 2) {
    ms.clear();
    for (std::string s = argv[2]; !s.empty();) {
      ms.push_back(std::atoi(s.c_str()));
      const size_t c = s.find(',');
      s = c == std::string::npos ? "" : s.substr(c + 1);
    }
  }
  if (!packed_int8_available() || !packed_bf16_available()) {
    std::fprintf(stderr, "this processor lacks AVX512-VNNI or AVX512-BF16\n");
    return 1;
  }
  struct Shape {
    const char* what;
    int n, k;
  };
  const Shape shapes[] = {{"MiniLM qkv", 1152, 384},  {"MiniLM out", 384, 384},  {"MiniLM ffn_in", 1536, 384},
                          {"MiniLM ffn_out", 384, 1536}, {"BERT qkv", 2304, 768}, {"BERT out", 768, 768},
                          {"BERT ffn_in", 3072, 768},  {"BERT ffn_out", 768, 3072}};
  std::printf("median of %d calls each, alternating, 1 thread, CPU time\n", reps);
  std::printf("%-15s %5s %5s %5s | GFLOP/s bf16 int8 ratio | error vs f32: bf16 int8\n", "shape", "m", "n", "k");
  std::mt19937 rng(1);
  std::normal_distribution<float> u(0, 1);
  for (int m : ms)
    for (const Shape& s : shapes) {
      std::vector<float> a(size_t(m) * s.k), b(size_t(s.n) * s.k), bias(size_t(s.n), 0.1f);
      for (auto& x : a) x = u(rng);
      for (auto& x : b) x = 0.05f * u(rng);
      std::vector<BFloat> a16(a.size()), b16(b.size());
      for (size_t i = 0; i < a.size(); ++i) a16[i] = from_f32<BFloat>(a[i]);
      for (size_t i = 0; i < b.size(); ++i) b16[i] = from_f32<BFloat>(b[i]);
      uint32_t* pb = aligned<uint32_t>(size_t(packed_bf16_words(s.n, s.k)));
      uint32_t* pi = aligned<uint32_t>(size_t(packed_int8_words(s.n, s.k)));
      pack_weights_bf16_pairs(b16.data(), s.n, s.k, s.k, true, pb);
      pack_weights_int8(b16.data(), s.n, s.k, s.k, true, pi);
      std::vector<float> c(size_t(m) * s.n);
      std::vector<BFloat> out_b(c.size()), out_i(c.size());
      std::vector<uint8_t> q(size_t(m) * int8_row_bytes(s.k));
      std::vector<float> qs(static_cast<size_t>(m));
      std::vector<int32_t> qz(static_cast<size_t>(m));
      Bf16Output ob{out_b.data(), nullptr, s.n}, oi{out_i.data(), nullptr, s.n};
      std::vector<double> tb, ti;
      for (int r = 0; r < reps + 1; ++r) {
        const double t0 = thread_seconds();
        gemm_packed_bf16(false, m, s.n, s.k, a16.data(), s.k, pb, c.data(), s.n, bias.data(), rlx::Activation::Gelu,
                         1, ob);
        const double t1 = thread_seconds();
        quantize_rows_int8(a16.data(), m, s.k, s.k, q.data(), qs.data(), qz.data(), 1);
        gemm_packed_int8(m, s.n, s.k, Int8Rows{q.data(), int8_row_bytes(s.k), qs.data(), qz.data()}, pi, c.data(), s.n,
                         bias.data(), rlx::Activation::Gelu, 1, oi);
        const double t2 = thread_seconds();
        if (r > 0) tb.push_back(t1 - t0), ti.push_back(t2 - t1);
      }
      // Against the f32 product of the bf16 inputs (before GELU: compare the
      // linear part on a few rows).
      double eb = 0, ei = 0, top = 0;
      const int rows = std::min(m, 8);
      std::vector<float> lin_b(size_t(rows) * s.n), lin_i(size_t(rows) * s.n);
      gemm_packed_bf16(false, rows, s.n, s.k, a16.data(), s.k, pb, lin_b.data(), s.n, nullptr, rlx::Activation::None, 1);
      gemm_packed_int8(rows, s.n, s.k, Int8Rows{q.data(), int8_row_bytes(s.k), qs.data(), qz.data()}, pi, lin_i.data(), s.n,
                       nullptr, rlx::Activation::None, 1);
      for (int i = 0; i < rows; ++i)
        for (int j = 0; j < s.n; ++j) {
          double ref = 0;
          for (int kk = 0; kk < s.k; ++kk)
            ref += double(to_f32(a16[size_t(i) * s.k + kk])) * to_f32(b16[size_t(j) * s.k + kk]);
          top = std::max(top, std::fabs(ref));
          eb = std::max(eb, std::fabs(lin_b[size_t(i) * s.n + j] - ref));
          ei = std::max(ei, std::fabs(lin_i[size_t(i) * s.n + j] - ref));
        }
      const double flop = 2.0 * m * s.n * s.k;
      const double gb = flop / median(tb) / 1e9, gi = flop / median(ti) / 1e9;
      std::printf("%-15s %5d %5d %5d | %7.1f %7.1f %5.2fx | %.1e %.1e\n", s.what, m, s.n, s.k, gb, gi, gi / gb,
                  eb / top, ei / top);
      std::fflush(stdout);
      std::free(pb);
      std::free(pi);
    }
}
