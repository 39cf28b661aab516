// Rotary position embedding. Half-split (NeoX/HF) pairs dim d with d + n_rot/2;
// interleaved (GPT-J/GGUF) pairs 2i with 2i+1. Dims >= n_rot are copied.
#include <cmath>

#include "backends/cpu/cpu_parallel.h"
#include "backends/cpu/cpu_registry.h"
#include "backends/cpu/cpu_storage.h"

namespace rlx::cpu {
namespace {

template <class T> void rope(const RopeParams& p, CpuContext& ctx) {
  uint8_t* arena = ctx.arena();
  const T* x = at<T>(arena, p.x);
  const int32_t* pos = at<int32_t>(arena, p.pos);
  T* out = at<T>(arena, p.out);
  const int64_t hd = p.head_dim, n_rot = p.n_rot > 0 ? p.n_rot : p.head_dim, half = n_rot / 2;
  const int64_t rows = p.batch * p.seq;
  parallel_for(rows, rows * p.heads * hd > 16384, [&](int64_t r) {
    const int64_t s = r % p.seq;
    const double position = p.pos_start ? double(pos[r / p.seq]) + double(s) : pos[p.pos_batched ? r : s];
    for (int64_t h = 0; h < p.heads; ++h) {
      const T* xh = x + r * p.stride + p.offset + h * hd;
      T* oh = out + (r * p.heads + h) * hd;
      for (int64_t i = 0; i < half; ++i) {
        // Angle in double: positions in the thousands lose phase in f32.
        const double angle = position * std::pow(double(p.theta), -2.0 * double(i) / double(n_rot));
        const float c = float(std::cos(angle)), sn = float(std::sin(angle));
        const int64_t d0 = p.interleaved ? 2 * i : i, d1 = p.interleaved ? 2 * i + 1 : i + half;
        const float a = to_f32(xh[d0]), b = to_f32(xh[d1]);
        oh[d0] = from_f32<T>(a * c - b * sn);
        oh[d1] = from_f32<T>(b * c + a * sn);
      }
      for (int64_t d = 2 * half; d < hd; ++d) oh[d] = xh[d];
    }
  });
}

}  // namespace

void register_cpu_rope(CpuRegistry& r) {
  r.add<RopeParams>(DType::F32, rope<float>);
  r.add<RopeParams>(DType::F16, rope<Half>);
  r.add<RopeParams>(DType::BF16, rope<BFloat>);
}

}  // namespace rlx::cpu
