#include "backends/cuda/gemv_stream.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "backends/cuda/device_types.cuh"
#include "backends/cuda/dispatch.h"
#include "backends/cuda/launch.cuh"
#include "backends/cuda/weight_loads.cuh"

namespace rlx::cuda {
namespace {

constexpr int kThreads = 256, kWarps = kThreads / 32;
constexpr int kMaxRows = 8;       // output columns a tile
constexpr int kMaxStages = 8;
constexpr int kMaxXChunks = 8;    // 16-byte chunks of x a thread holds: k up to 8 * 256 * 8 = 16384
constexpr int64_t kStageTarget = 16 * 1024;
constexpr int64_t kSmemBudget = 96 * 1024;  // two blocks of neighbouring products fit an SM together

// A tile: `rows` output columns (with a GLU, as many gate rows and up rows).
struct StreamShape {
  int rows, stages;
  int64_t tiles, stage_bytes;
};

__host__ __device__ inline StreamShape stream_shape(int64_t n, int64_t k, int64_t es, bool glu) {
  StreamShape s{};
  const int64_t row_bytes = k * es, pairs = glu ? 2 : 1, cols = glu ? n / 2 : n;
  s.rows = kMaxRows;
  while (s.rows > 1 && s.rows * pairs * row_bytes > kStageTarget) s.rows /= 2;
  s.stage_bytes = s.rows * pairs * row_bytes;
  const int64_t fit = kSmemBudget / s.stage_bytes;
  s.stages = int(fit < kMaxStages ? fit : kMaxStages);
  s.tiles = (cols + s.rows - 1) / s.rows;
  return s;
}

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return uint32_t(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbar_init(uint64_t* bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(bar)) : "memory");
}

__device__ __forceinline__ void mbar_expect(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
}

__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  uint32_t done = 0;
  while (!done) {
    asm volatile(
        "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
        : "=r"(done)
        : "r"(smem_addr(bar)), "r"(parity)
        : "memory");
  }
}

// bytes (a multiple of 16) from global src to shared dst, completing on bar.
__device__ __forceinline__ void bulk_copy(void* dst, const void* src, uint32_t bytes, uint64_t* bar, uint64_t policy) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;" ::"r"(
          smem_addr(dst)),
      "l"(src), "r"(bytes), "r"(smem_addr(bar)), "l"(policy)
      : "memory");
}

template <class T, int J, bool Norm, bool Glu>
__global__ void __launch_bounds__(kThreads, 1) gemv_stream_kernel(const MatMulParams p, uint8_t* arena) {
  extern __shared__ __align__(128) uint8_t stages[];
  __shared__ __align__(8) uint64_t full[kMaxStages];
  __shared__ float red[2][kWarps][2 * kMaxRows];
  __shared__ float ss_part[kWarps];
  constexpr int ve = kChunkElems<T>;
  const StreamShape sh = stream_shape(p.n, p.k, int64_t(sizeof(T)), Glu);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int64_t cols = Glu ? p.n / 2 : p.n, row_bytes = p.k * int64_t(sizeof(T)), kc = row_bytes / 16;
  const uint8_t* w = arena + p.b;
  const uint64_t policy = weight_load_policy(p.weights_evict_first);
  // Iteration i of this block: tile blockIdx.x + i * gridDim.x, in stage i % stages.
  auto issue = [&](int64_t i) {
    const int64_t t = blockIdx.x + i * gridDim.x;
    if (t >= sh.tiles) return;
    const int s = int(i % sh.stages);
    const int64_t c0 = t * sh.rows, rows = cols - c0 < sh.rows ? cols - c0 : sh.rows;
    const uint32_t bytes = uint32_t(rows * row_bytes);
    uint8_t* dst = stages + s * sh.stage_bytes;
    mbar_expect(&full[s], Glu ? 2 * bytes : bytes);
    bulk_copy(dst, w + c0 * row_bytes, bytes, &full[s], policy);
    if constexpr (Glu) bulk_copy(dst + sh.rows * row_bytes, w + (cols + c0) * row_bytes, bytes, &full[s], policy);
  };
  if (tid == 0) {
    for (int s = 0; s < sh.stages; ++s) mbar_init(&full[s]);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    // Constant weights: every stage's copy goes out before waiting for the
    // kernel that writes x.
    for (int s = 0; s < sh.stages; ++s) issue(s);
  }
  __syncthreads();
  pdl_entry();
  // This thread's chunks of x (c = tid + j * kThreads), times gamma with a norm.
  const uint4* x = at<const uint4>(arena, p.a);
  const uint4* gamma = Norm ? at<const uint4>(arena, p.fused.norm_gamma) : nullptr;
  float xf[J][ve];
  float ss = 0.f;
#pragma unroll
  for (int j = 0; j < J; ++j) {
    const int64_t c = tid + int64_t(j) * kThreads;
    if (c < kc) {
      unpack_chunk<T>(x[c], xf[j]);
      if constexpr (Norm) {
        float g[ve];
        unpack_chunk<T>(gamma[c], g);
#pragma unroll
        for (int e = 0; e < ve; ++e) {
          ss = fmaf(xf[j][e], xf[j][e], ss);
          xf[j][e] *= g[e];
        }
      }
    } else {
#pragma unroll
      for (int e = 0; e < ve; ++e) xf[j][e] = 0.f;
    }
  }
  float scale = 1.f;
  if constexpr (Norm) {
    ss = warp_sum(ss);
    if (lane == 0) ss_part[warp] = ss;
    __syncthreads();
    float t = 0.f;
#pragma unroll
    for (int i = 0; i < kWarps; ++i) t += ss_part[i];
    scale = rsqrtf(t / float(p.k) + p.fused.norm_eps);
  }
  constexpr int kSums = Glu ? 2 * kMaxRows : kMaxRows;
  const T* bias = p.bias != kNoBuffer ? at<const T>(arena, p.bias) : nullptr;
  const T* residual = !Glu && p.fused.residual != kNoBuffer ? at<const T>(arena, p.fused.residual) : nullptr;
  int s = 0;
  uint32_t phase = 0;
  for (int64_t i = 0;; ++i) {
    const int64_t t = blockIdx.x + i * gridDim.x;
    if (t >= sh.tiles) break;
    const int64_t c0 = t * sh.rows;
    const int rows = int(cols - c0 < sh.rows ? cols - c0 : sh.rows);
    // The epilogue's operands load while the tile's weights arrive: off the
    // block's critical path (each tile ends in a barrier).
    float add_gate = 0.f, add_up = 0.f;
    if (tid < rows) {
      const int64_t col = c0 + tid;
      if (bias) {
        add_gate = to_f32(bias[col]);
        if constexpr (Glu) add_up = to_f32(bias[cols + col]);
      }
      if (residual) add_up = to_f32(residual[col]);
    }
    mbar_wait(&full[s], phase);
    const uint8_t* st = stages + s * sh.stage_bytes;
    float acc[kSums];
#pragma unroll
    for (int r = 0; r < kSums; ++r) {
      acc[r] = 0.f;
      const int row = Glu && r >= kMaxRows ? sh.rows + (r - kMaxRows) : r;  // the up rows follow the gate rows
      if ((r % kMaxRows) >= rows) continue;
      const uint4* wr = reinterpret_cast<const uint4*>(st + row * row_bytes);
#pragma unroll
      for (int j = 0; j < J; ++j) {
        const int64_t c = tid + int64_t(j) * kThreads;
        if (c >= kc) break;
        float wf[ve];
        unpack_chunk<T>(wr[c], wf);
#pragma unroll
        for (int e = 0; e < ve; ++e) acc[r] = fmaf(wf[e], xf[j][e], acc[r]);
      }
    }
    float(*part)[2 * kMaxRows] = red[i & 1];
#pragma unroll
    for (int r = 0; r < kSums; ++r) {
      if ((r % kMaxRows) >= rows) continue;
      const float v = warp_sum(acc[r]);
      if (lane == 0) part[warp][r] = v;
    }
    __syncthreads();  // the stage is read and the partial sums are in
    if (tid == 0) {
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // our reads before the copy's writes
      issue(i + sh.stages);
    }
    if (++s == sh.stages) s = 0, phase ^= 1u;
    if (tid < rows) {
      float sum = 0.f, up = 0.f;
#pragma unroll
      for (int q = 0; q < kWarps; ++q) {
        sum += part[q][tid];
        if constexpr (Glu) up += part[q][kMaxRows + tid];
      }
      sum = sum * scale + add_gate;
      float v;
      if constexpr (Glu) v = apply_activation(p.fused.glu, sum) * (up * scale + add_up);
      else v = apply_activation(p.act, sum) + add_up;  // add_up: the residual
      at<T>(arena, p.out)[c0 + tid] = from_f32<T>(v);
    }
  }
}

std::atomic<int64_t> g_launches{0};

// One instantiation's launch; its shared memory limit raised once.
template <class T, int J, bool Norm, bool Glu>
void launch_kernel(const MatMulParams& p, const LaunchContext& ctx, unsigned grid, size_t smem) {
  static const bool sized = [] {
    check(cudaFuncSetAttribute(gemv_stream_kernel<T, J, Norm, Glu>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               int(kSmemBudget)),
          "gemv_stream shared memory");
    return true;
  }();
  (void)sized;
  launch(gemv_stream_kernel<T, J, Norm, Glu>, dim3(grid), dim3(kThreads), smem, ctx, p);
}

template <class T, bool Norm, bool Glu>
void launch_with(const MatMulParams& plan, const LaunchContext& ctx) {
  MatMulParams p = plan;
  p.weights_evict_first = evict_first_weights(true);
  const StreamShape sh = stream_shape(p.n, p.k, int64_t(sizeof(T)), Glu);
  const int64_t kc = p.k * int64_t(sizeof(T)) / 16, per_thread = (kc + kThreads - 1) / kThreads;
  const unsigned grid = unsigned(std::min<int64_t>(sh.tiles, multiprocessor_count()));
  const size_t smem = size_t(sh.stages * sh.stage_bytes);
  if (per_thread <= 1) launch_kernel<T, 1, Norm, Glu>(p, ctx, grid, smem);
  else if (per_thread <= 2) launch_kernel<T, 2, Norm, Glu>(p, ctx, grid, smem);
  else if (per_thread <= 4) launch_kernel<T, 4, Norm, Glu>(p, ctx, grid, smem);
  else launch_kernel<T, 8, Norm, Glu>(p, ctx, grid, smem);
  ++g_launches;
}

}  // namespace

bool gemv_stream_enabled() {
  const char* e = std::getenv("RLX_GEMV_STREAM");
  if (e && (std::strcmp(e, "0") == 0 || std::strcmp(e, "1") == 0)) return *e == '1';
  return kGemvStreamByDefault;
}

bool gemv_stream_accepts(const MatMulParams& p) {
  if ((p.dtype != DType::F16 && p.dtype != DType::BF16) || p.m != 1 || p.batch != 1 || !p.b_constant || p.trans_a ||
      !p.trans_b || p.ldb != p.k || p.n < 1 || p.n > (int64_t(1) << 30))
    return false;
  const int64_t es = int64_t(dtype_size(p.dtype)), row_bytes = p.k * es;
  const bool glu = p.fused.glu != Activation::None;
  if (row_bytes % 16 != 0 || row_bytes / 16 > int64_t(kMaxXChunks) * kThreads || (glu && p.n % 2 != 0)) return false;
  if (p.a % 16 != 0 || p.b % 16 != 0 || (p.fused.norm_gamma != kNoBuffer && p.fused.norm_gamma % 16 != 0)) return false;
  return stream_shape(p.n, p.k, es, glu).stages >= 2;
}

void run_gemv_stream(const MatMulParams& p, const LaunchContext& ctx) {
  const bool norm = p.fused.norm_gamma != kNoBuffer, glu = p.fused.glu != Activation::None;
  dispatch_float(p.dtype, ctx.label, [&]<class T>() {
    if constexpr (!std::is_same_v<T, float>) {
      if (norm && glu) launch_with<T, true, true>(p, ctx);
      else if (norm) launch_with<T, true, false>(p, ctx);
      else if (glu) launch_with<T, false, true>(p, ctx);
      else launch_with<T, false, false>(p, ctx);
    }
  });
}

int64_t gemv_stream_launches() { return g_launches.load(); }

}  // namespace rlx::cuda
