// Token sampling over the last dim (temperature, top-k, top-p): each row
// through the host reference of src/thunks/sample_math.h, which the host
// Sampler and the CUDA kernel also follow, so all three pick the same token.
#include <vector>

#include "backends/cpu/cpu_parallel.h"
#include "backends/cpu/cpu_registry.h"
#include "backends/cpu/cpu_storage.h"
#include "thunks/sample_math.h"

namespace rlx::cpu {
namespace {

template <class T> void sample(const SampleParams& p, CpuContext& ctx) {
  const T* x = at<T>(ctx.arena(), p.x);
  const int32_t* pos = at<int32_t>(ctx.arena(), p.positions);
  int32_t* out = at<int32_t>(ctx.arena(), p.out);
  const SampleSpec spec{p.temperature, p.top_k, p.top_p};
  parallel_for(p.rows, p.rows > 1 && p.cols > 4096, [&](int64_t r) {
    const T* row = x + r * p.cols;
    const float u = sample_uniform(p.seed, pos[r]);
    if constexpr (sizeof(T) == 4) {
      out[r] = sample_row(row, p.cols, spec, u);
    } else {
      std::vector<float> f(static_cast<size_t>(p.cols));
      for (int64_t c = 0; c < p.cols; ++c) f[size_t(c)] = to_f32(row[c]);
      out[r] = sample_row(f.data(), p.cols, spec, u);
    }
  });
}

}  // namespace

void register_cpu_sample(CpuRegistry& r) {
  r.add<SampleParams>(DType::F32, sample<float>);
  r.add<SampleParams>(DType::F16, sample<Half>);
  r.add<SampleParams>(DType::BF16, sample<BFloat>);
}

}  // namespace rlx::cpu
