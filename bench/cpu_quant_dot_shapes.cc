// matmul_q's one-row product (decode: one activation row against every
// weight row) at SmolLM2-135M's shapes, per format, on one thread timed by
// the thread's CPU time: the weight bytes streamed per second, against the
// machine's streaming read rate (bench/mem_read_bandwidth.cc). Built on
// request: ninja -C build rlx_quant_dot_bench && build/rlx_quant_dot_bench [REPS]
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/cpu_quant_dot.h"
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
  const Shape shapes[] = {{"q/o 576x576", 576, 576},  {"k/v 192x576", 192, 576},    {"gate+up 3072x576", 3072, 576},
                          {"down 576x1536", 576, 1536}, {"lm head 49152x576", 49152, 576}};
  const QuantType types[] = {QuantType::Q4_0, QuantType::Q4_1, QuantType::Q8_0};
  const QuantKernel kernel = quant_kernel();
  std::printf("kernel %s, %d reps, CPU time of one thread\n", quant_kernel_name(kernel), reps);
  std::printf("%-20s %-5s %10s %10s\n", "shape", "type", "us/call", "GB/s");
  std::mt19937 rng(7);
  for (QuantType t : types) {
    for (const Shape& s : shapes) {
      const int64_t blocks = s.k / kQuantBlock, per = quant_scales_per_block(t);
      const int64_t row_bytes = blocks * quant_block_bytes(t);
      std::vector<uint8_t> q(size_t(s.n * row_bytes));
      std::vector<uint16_t> sc(size_t(s.n * blocks * per));
      for (auto& b : q) b = uint8_t(rng());
      for (auto& h : sc) h = float_to_half(0.01f * float(rng() % 100 + 1));
      std::vector<float> x(size_t(s.k)), y(size_t(s.n));
      for (auto& v : x) v = float(int(rng() % 2001) - 1000) / 1000.f;
      Q8Activations a;
      quantize_activations(x.data(), 1, s.k, t, a);
      const QuantRows w{q.data(), sc.data(), row_bytes, blocks * per};
      const QuantProduct product = quant_product(t, kernel);
      const int inner = int(std::max<int64_t>(1, 20000000 / (s.n * row_bytes)));
      std::vector<double> times;
      for (int r = 0; r < reps; ++r) {
        const double t0 = thread_seconds();
        for (int j = 0; j < inner; ++j) product(w, 0, s.n, a, y.data(), s.n);
        times.push_back((thread_seconds() - t0) / inner);
      }
      std::sort(times.begin(), times.end());
      const double med = times[times.size() / 2];
      const double bytes = double(q.size() + 2 * sc.size());
      std::printf("%-20s %-5s %10.1f %10.2f\n", s.name, std::string(quant_type_name(t)).c_str(), med * 1e6, bytes / med * 1e-9);
    }
  }
  return 0;
}
