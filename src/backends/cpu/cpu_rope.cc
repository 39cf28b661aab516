// Rotary position embedding (the math: cpu_rope.h).
#include <vector>

#include "backends/cpu/cpu_parallel.h"
#include "backends/cpu/cpu_registry.h"
#include "backends/cpu/cpu_rope.h"

namespace rlx::cpu {
namespace {

template <class T> void rope(const RopeParams& p, CpuContext& ctx) {
  uint8_t* arena = ctx.arena();
  const T* x = at<T>(arena, p.x);
  const int32_t* pos = at<int32_t>(arena, p.pos);
  T* out = at<T>(arena, p.out);
  const int64_t hd = p.head_dim, n_rot = p.n_rot > 0 ? p.n_rot : p.head_dim;
  const int64_t rows = p.batch * p.seq;
  const T* gamma = p.gamma != kNoBuffer ? at<T>(arena, p.gamma) : nullptr;
  parallel_for(rows, rows * p.heads * hd > 16384, [&](int64_t r) {
    const int64_t s = r % p.seq;
    const double position = p.pos_start ? double(pos[r / p.seq]) + double(s) : pos[p.pos_batched ? r : s];
    const T* src = x + r * p.stride + p.offset;
    thread_local std::vector<T> normed;
    if (gamma) {  // the heads normalized first, into a row of their own
      normed.resize(size_t(p.heads * hd));
      head_rms_norm(src, normed.data(), p.heads, hd, gamma, p.norm_eps);
      src = normed.data();
    }
    rope_row(src, out + r * p.heads * hd, p.heads, hd, n_rot, p.interleaved, p.theta,
             position, p.freqs);
  });
}

}  // namespace

void register_cpu_rope(CpuRegistry& r) {
  r.add<RopeParams>(DType::F32, rope<float>);
  r.add<RopeParams>(DType::F16, rope<Half>);
  r.add<RopeParams>(DType::BF16, rope<BFloat>);
}

}  // namespace rlx::cpu
