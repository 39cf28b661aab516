// Matrix-vector chains of quantized products (matvec_chain.h): the tiles of
// gemv_quant.cu's kernel (8 warps, a weight row each, decoded in registers)
// taken by a grid resident at once, op after op. A block stages x (normed,
// as f32) in shared memory once per op for all its tiles, after issuing its
// first tile's weight loads and waiting for the op before.
#include <algorithm>
#include <type_traits>

#include "backends/cuda/chain_sync.cuh"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/dispatch.h"
#include "backends/cuda/gemv_quant_tiles.cuh"
#include "backends/cuda/launch.cuh"
#include "backends/cuda/matvec_chain.h"

namespace rlx::cuda {
namespace {

using namespace gemv_quant_tiles;
using namespace chain_sync;

// The whole of x is staged at once: rows the one-product kernel also takes
// in one tile (7264 columns) chain, so both sum in the same order.
constexpr size_t kChainXSmemMax = kXSmemBytes;

enum QuantChainVariant : uint8_t { kQNorm = 1, kQGlu = 2 };

using QuantChainParams = ChainLaunch<MatMulQParams, kMaxChainOps>;
using QuantChainOp = QuantChainParams::Op;
static_assert(sizeof(QuantChainParams) <= 4000, "a chain's ops travel as kernel parameters");

size_t staged_x_bytes(const MatMulQParams& p) { return size_t(p.k / kQuantBlock) * kXStride * sizeof(float); }

bool is_glu(const MatMulQParams& p) { return p.fused.glu != Activation::None; }

int64_t tiles_of(const MatMulQParams& p) {
  const int64_t cols = is_glu(p) ? p.n / 2 : p.n, per = is_glu(p) ? kRowsPerBlock / 2 : kRowsPerBlock;
  return (cols + per - 1) / per;
}

// This block's tiles of one op (a tile: kRowsPerBlock weight rows, or half
// as many output columns of gate and up rows with Glu). `wait` runs after
// the first tile's weight loads, before x is read.
template <class T, QuantType Q, bool Norm, bool Glu, class Wait>
__device__ __forceinline__ void run_quant_tiles(const QuantChainOp& op, uint8_t* arena, float* xs, Wait wait) {
  constexpr int kc = kChunks<Q>, kU = kUnroll;
  constexpr int kCols = Glu ? kRowsPerBlock / 2 : kRowsPerBlock;
  const MatMulQParams& p = op.p;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t blocks = p.k / kQuantBlock, cols = Glu ? p.n / 2 : p.n;
  int64_t col = 0, row = 0;
  bool live = false;
  const uint4* wq = nullptr;
  const __half* sc = nullptr;
  uint4 w[kU][kc];
  __half d[kU];
  auto locate = [&](int64_t tile) {
    col = tile * kCols + (Glu ? warp % kCols : warp);
    row = Glu ? col + (warp / kCols) * cols : col;
    live = col < cols;
    wq = reinterpret_cast<const uint4*>(arena + p.quants) + (live ? row : 0) * blocks * kc;
    sc = at<const __half>(arena, p.scales) + (live ? row : 0) * blocks;
  };
  auto load = [&](int64_t c0) {
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int64_t c = c0 + 32 * u;
      const bool in = live && c < blocks;
#pragma unroll
      for (int i = 0; i < kc; ++i) w[u][i] = in ? __ldg(wq + c * kc + i) : make_uint4(0, 0, 0, 0);
      d[u] = in ? sc[c] : __float2half(0.f);
    }
  };
  int64_t t = blockIdx.x;
  if (t < op.tiles) {
    locate(t);
    load(lane);
  }
  wait();
  const T* gamma = Norm ? at<const T>(arena, p.fused.norm_gamma) : nullptr;
  float ss[1] = {0.f};
  stage_x<T, 1, true>(p, arena, 0, blocks, blocks, gamma, xs, ss);
  __syncthreads();
  if constexpr (Norm) norm_scales<1>(p, ss);  // block-uniform: every thread takes part
  for (; t < op.tiles; t += gridDim.x) {
    if (t != blockIdx.x) {
      locate(t);
      load(lane);
    }
    float acc = 0.f;
    for (int64_t c0 = lane; c0 < blocks; c0 += 32 * kU) {
      if (c0 != lane) load(c0);
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        const int64_t c = c0 + 32 * u;
        if (c >= blocks) break;
        float s[1] = {0.f};
        dot_block<Q, 1>(w[u], xs + c * kXStride, blocks * kXStride, s);
        acc = fmaf(__half2float(d[u]), s[0], acc);
      }
    }
    const float bias = live && p.bias != kNoBuffer ? to_f32(at<const T>(arena, p.bias)[row]) : 0.f;
    const float s = warp_sum(acc) * (Norm ? ss[0] : 1.f) + bias;
    if constexpr (Glu) {
      __shared__ float part[kRowsPerBlock];
      if (lane == 0) part[warp] = s;
      __syncthreads();
      if (live && warp < kCols && lane == 0)
        at<T>(arena, p.out)[col] = from_f32<T>(apply_activation(p.fused.glu, part[warp]) * part[warp + kCols]);
      __syncthreads();  // part is read before the next tile writes it
    } else if (live && lane == 0) {
      const float r = p.fused.residual != kNoBuffer ? to_f32(__ldcg(at<const T>(arena, p.fused.residual) + row)) : 0.f;
      at<T>(arena, p.out)[row] = from_f32<T>(s + r);
    }
  }
}

template <class T, QuantType Q, class Wait>
__device__ __forceinline__ void run_quant_variant(const QuantChainOp& op, uint8_t* arena, float* xs, Wait wait) {
  switch (op.variant) {
    case 0: return run_quant_tiles<T, Q, false, false>(op, arena, xs, wait);
    case kQNorm: return run_quant_tiles<T, Q, true, false>(op, arena, xs, wait);
    case kQGlu: return run_quant_tiles<T, Q, false, true>(op, arena, xs, wait);
    default: return run_quant_tiles<T, Q, true, true>(op, arena, xs, wait);
  }
}

// One kernel per weight format: each op's variant (norm, glu) is a switch.
// Three blocks an SM, as the one-product kernel runs (Q8_0 and FP8 would
// take 104 registers unbounded, two blocks; bounded, 8 bytes spill).
template <class T, QuantType Q>
__global__ void __launch_bounds__(kRowsPerBlock * 32, 3)
    quant_chain_kernel(const __grid_constant__ QuantChainParams c, uint8_t* arena) {
  extern __shared__ float4 smem[];
  float* xs = reinterpret_cast<float*>(smem);
  const unsigned long long target = launch_target(c.counters + kMaxChainOps);
  run_quant_variant<T, Q>(c.op[0], arena, xs, [] { pdl_entry(); });
  for (int i = 1; i < c.ops; ++i) {
    arrive(c.counters + i - 1);  // also: every thread is done with xs
    run_quant_variant<T, Q>(c.op[i], arena, xs, [&] { wait_for(c.counters + i - 1, target, i, c.backoff_ns); });
  }
}

using QuantChainKernel = void (*)(QuantChainParams, uint8_t*);

QuantChainKernel quant_chain_kernel_for(DType dtype, QuantType q) {
  QuantChainKernel k = nullptr;
  dispatch_float(dtype, "quantized matvec chain", [&]<class T>() {
    if constexpr (!std::is_same_v<T, float>) {
      if (q == QuantType::Q4_0) k = quant_chain_kernel<T, QuantType::Q4_0>;
      else if (q == QuantType::FP8) k = quant_chain_kernel<T, QuantType::FP8>;
      else k = quant_chain_kernel<T, QuantType::Q8_0>;
    }
  });
  RLX_CHECK(k, "quantized matvec chain: no kernel for " << dtype_name(dtype));
  return k;
}

class QuantChain final : public MatVecChain {
 public:
  QuantChain(const std::vector<MatMulQParams>& ops, QuantChainKernel kernel, size_t smem, int64_t most_tiles)
      : MatVecChain(ops.size(), reinterpret_cast<const void*>(kernel), kRowsPerBlock * 32, smem, most_tiles),
        kernel_(kernel),
        smem_(smem) {
    params_.ops = int32_t(ops.size());
    params_.counters = counters_;
    params_.backoff_ns = backoff_ns_;
    for (size_t i = 0; i < ops.size(); ++i) {
      params_.op[i].p = ops[i];
      params_.op[i].tiles = tiles_of(ops[i]);
      params_.op[i].variant =
          uint8_t((ops[i].fused.norm_gamma != kNoBuffer ? kQNorm : 0) | (is_glu(ops[i]) ? kQGlu : 0));
    }
  }
  void execute(const LaunchContext& ctx) const override {
    launch(kernel_, dim3(unsigned(grid_)), dim3(kRowsPerBlock * 32), smem_, ctx, params_, 1, cooperative_);
    count_matvec_chain_launch();
  }

 private:
  QuantChainKernel kernel_;
  QuantChainParams params_{};
  size_t smem_;
};

}  // namespace

bool matvec_chain_accepts(const MatMulQParams& p) {
  return p.m == 1 && p.weights_constant && p.dequantized == kNoBuffer &&
         (p.dtype == DType::F16 || p.dtype == DType::BF16) &&
         (p.quant == QuantType::Q4_0 || p.quant == QuantType::Q8_0 || p.quant == QuantType::FP8) &&
         p.k % kQuantBlock == 0 && staged_x_bytes(p) <= kChainXSmemMax && (!is_glu(p) || p.n % 2 == 0);
}

std::unique_ptr<MatVecChain> make_matvec_chain(const std::vector<MatMulQParams>& ops) {
  RLX_CHECK(!ops.empty(), "quantized matvec chain of no products");
  size_t smem = 0;
  int64_t most_tiles = 0;
  for (const MatMulQParams& p : ops) {
    RLX_CHECK(matvec_chain_accepts(p) && p.dtype == ops[0].dtype && p.quant == ops[0].quant,
              "quantized matvec chain: a product it cannot run");
    smem = std::max(smem, staged_x_bytes(p));
    most_tiles = std::max(most_tiles, tiles_of(p));
  }
  const QuantChainKernel kernel = quant_chain_kernel_for(ops[0].dtype, ops[0].quant);
  return std::make_unique<QuantChain>(ops, kernel, smem, most_tiles);
}

}  // namespace rlx::cuda
