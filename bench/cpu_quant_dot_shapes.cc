// matmul_q's products at SmolLM2-135M's shapes, per format, on one thread
// timed by the thread's CPU time: the weight bytes streamed per second
// (against the machine's streaming read rate, bench/mem_read_bandwidth.cc),
// the weights in the row layout (the one-row kernel for one row of x, as in
// decode; the tiled kernel from 16 rows) and interleaved 16 rows at a time
// (cpu_quant_rows16.h), side by side, with the largest difference between
// the two. Built on request:
//   ninja -C build rlx_quant_dot_bench && build/rlx_quant_dot_bench [REPS] [ROWS]
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/cpu_quant_dot.h"
#include "backends/cpu/cpu_quant_gemm.h"
#include "backends/cpu/cpu_quant_rows16.h"
#include "rlx/dtype.h"

namespace {

double thread_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

struct Shape {
  const char* name;
  int64_t n, k;
};

}  // namespace

int main(int argc, char** argv) {
  using namespace rlx;
  using namespace rlx::cpu;
  const int reps = argc > 1 ? std::atoi(argv[1]) : 20;
  const int64_t m = argc > 2 ? std::atoll(argv[2]) : 1;
  const Shape shapes[] = {{"q/o 576x576", 576, 576},  {"k/v 192x576", 192, 576},    {"gate+up 3072x576", 3072, 576},
                          {"down 576x1536", 576, 1536}, {"lm head 49152x576", 49152, 576}};
  const QuantType types[] = {QuantType::Q4_0, QuantType::Q4_1, QuantType::Q8_0};
  const QuantKernel kernel = quant_kernel();
  std::printf("kernel %s, %d reps, %lld rows of x, CPU time of one thread\n", quant_kernel_name(kernel), reps,
              (long long)m);
  std::printf("%-20s %-5s %10s %10s %12s %10s %8s %10s\n", "shape", "type", "us/call", "GB/s", "rows16 us", "GB/s",
              "ratio", "max diff");
  std::mt19937 rng(7);
  for (QuantType t : types) {
    for (const Shape& s : shapes) {
      const int64_t blocks = s.k / kQuantBlock, per = quant_scales_per_block(t);
      const int64_t row_bytes = blocks * quant_block_bytes(t);
      std::vector<uint8_t> q(size_t(s.n * row_bytes));
      std::vector<uint16_t> sc(size_t(s.n * blocks * per));
      for (auto& b : q) b = uint8_t(rng());
      for (auto& h : sc) h = float_to_half(0.01f * float(rng() % 100 + 1));
      std::vector<float> x(size_t(m * s.k)), y(size_t(m * s.n)), y16(size_t(m * s.n));
      for (auto& v : x) v = float(int(rng() % 2001) - 1000) / 1000.f;
      Q8Activations a;
      quantize_activations(x.data(), m, s.k, t, a);
      const QuantRows w{q.data(), sc.data(), row_bytes, blocks * per};
      std::vector<uint8_t> q16 = q;
      std::vector<uint16_t> sc16 = sc;
      pack_rows16(t, q16.data(), sc16.data(), s.n, s.k);
      const QuantRows w16{q16.data(), sc16.data(), row_bytes, blocks * per};
      const QuantProduct product = quant_product(t, kernel);
      const bool tiled = kernel == QuantKernel::Avx512Vnni && m >= kQuantGemmRows;
      ActivationTiles tiles;
      const QuantGemm gemm = tiled ? quant_gemm(t) : nullptr;
      auto row_layout = [&] {
        if (!tiled) return product(w, 0, s.n, a, y.data(), s.n);
        pack_activation_tiles(a, tiles);
        gemm(w, 0, s.n, tiles, y.data(), s.n);
      };
      auto interleaved = [&] { product_rows16(t, w16, 0, s.n / 16, a, y16.data(), s.n); };
      const int inner = int(std::max<int64_t>(1, 20000000 / (m * s.n * row_bytes)));
      auto time = [&](auto&& f) {
        std::vector<double> times;
        for (int r = 0; r < reps; ++r) {
          const double t0 = thread_seconds();
          for (int j = 0; j < inner; ++j) f();
          times.push_back((thread_seconds() - t0) / inner);
        }
        std::sort(times.begin(), times.end());
        return times[times.size() / 2];
      };
      const bool rows16 = kernel == QuantKernel::Avx512Vnni;
      const double med = time(row_layout), med16 = rows16 ? time(interleaved) : 0;
      double diff = 0;
      for (size_t i = 0; rows16 && i < y.size(); ++i)
        diff = std::max(diff, double(std::abs(y[i] - y16[i])) / std::max(1e-3, double(std::abs(y[i]))));
      const double bytes = double(q.size() + 2 * sc.size());
      std::printf("%-20s %-5s %10.1f %10.2f %12.1f %10.2f %8.2f %10.2e\n", s.name,
                  std::string(quant_type_name(t)).c_str(), med * 1e6, bytes / med * 1e-9, med16 * 1e6,
                  rows16 ? bytes / med16 * 1e-9 : 0.0, rows16 ? med / med16 : 0.0, diff);
    }
  }
  return 0;
}
