// Scaled dot-product attention, one query row per task: scores over the keys,
// a stable softmax, then the weighted sum of values. GQA, causal and padding
// masks; a fully masked row yields zeros.
#include <omp.h>

#include <cmath>
#include <limits>

#include "backends/cpu/cpu_registry.h"
#include "backends/cpu/cpu_storage.h"

namespace rlx::cpu {
namespace {

template <class T> void attention(const AttentionParams& p, CpuContext& ctx) {
  uint8_t* arena = ctx.arena();
  const T* q = at<T>(arena, p.q);
  const T* k = at<T>(arena, p.k);
  const T* v = at<T>(arena, p.v);
  const int32_t* mask = p.mask_kind == MaskKind::Padding ? at<int32_t>(arena, p.mask) : nullptr;
  T* out = at<T>(arena, p.out);
  const int64_t sq = p.sq, skv = p.skv, hd = p.head_dim;
  const int group = p.q_heads / p.kv_heads;
  // Per-thread buffers: skv scores, then head_dim accumulators.
  const int64_t per_thread = skv + hd;
  float* buffers = ctx.scratch(0, size_t(omp_get_max_threads() * per_thread));
  const int64_t tasks = p.batch * p.q_heads * sq;
#pragma omp parallel for if (tasks * skv * hd > 16384)
  for (int64_t task = 0; task < tasks; ++task) {
    const int64_t i = task % sq;
    const int64_t h = (task / sq) % p.q_heads;
    const int64_t b = task / (sq * p.q_heads);
    const int64_t kvh = h / group;
    float* scores = buffers + omp_get_thread_num() * per_thread;
    float* acc = scores + skv;
    const T* qr = q + (b * sq + i) * p.q_stride + p.q_offset + h * hd;
    T* o = out + ((b * sq + i) * p.q_heads + h) * hd;

    float mx = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < skv; ++j) {
      bool keep = true;
      if (p.mask_kind == MaskKind::Causal) keep = j <= i + skv - sq;
      if (mask) keep = mask[b * skv + j] != 0;
      if (!keep) {
        scores[j] = -std::numeric_limits<float>::infinity();
        continue;
      }
      const T* kr = k + (b * skv + j) * p.k_stride + p.k_offset + kvh * hd;
      float dot = 0.f;
      for (int64_t d = 0; d < hd; ++d) dot += to_f32(qr[d]) * to_f32(kr[d]);
      scores[j] = dot * p.scale;
      mx = std::fmax(mx, scores[j]);
    }
    for (int64_t d = 0; d < hd; ++d) acc[d] = 0.f;
    if (mx == -std::numeric_limits<float>::infinity()) {  // every key masked
      for (int64_t d = 0; d < hd; ++d) o[d] = from_f32<T>(0.f);
      continue;
    }
    float sum = 0.f;
    for (int64_t j = 0; j < skv; ++j) {
      if (scores[j] == -std::numeric_limits<float>::infinity()) continue;
      const float w = std::exp(scores[j] - mx);
      sum += w;
      const T* vr = v + (b * skv + j) * p.v_stride + p.v_offset + kvh * hd;
      for (int64_t d = 0; d < hd; ++d) acc[d] += w * to_f32(vr[d]);
    }
    const float inv = 1.f / sum;
    for (int64_t d = 0; d < hd; ++d) o[d] = from_f32<T>(acc[d] * inv);
  }
}

}  // namespace

void register_cpu_attention(CpuRegistry& r) {
  r.add<AttentionParams>(DType::F32, attention<float>);
  r.add<AttentionParams>(DType::F16, attention<Half>);
  r.add<AttentionParams>(DType::BF16, attention<BFloat>);
}

}  // namespace rlx::cpu
