// Matrix-vector products for few rows (decoding: one token per sequence):
// out[b, i, :] = act(x[b, i, :] . W[b]^T + bias) with W row-major [n, k].
// cuBLASLt tiles for large M and leaves most of the weight bandwidth unused
// at M = 1; here one warp (four for a long row) streams one weight row in
// 16-byte loads, several in flight per lane, and the bias and any activation
// are applied before the single store, so the product is one kernel at close
// to memory bandwidth.
// A decode step's RMSNorm before the product and residual add after it are
// fused here too (MatVecFusionParams).
#include "backends/cuda/gemv.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "backends/cuda/device_types.cuh"
#include "backends/cuda/dispatch.h"
#include "backends/cuda/gemv_tiles.cuh"
#include "backends/cuda/launch.cuh"

namespace rlx::cuda {
namespace {

using namespace gemv_tiles;

template <class T, int M, bool Norm, int Pre, bool Glu>
__global__ void __launch_bounds__(kWarps * 32, min_blocks<M, Pre>()) gemv_kernel(const MatMulParams p, uint8_t* arena) {
  gemv_row_tile<T, M, Norm, Pre, Glu>(p, arena, blockIdx.x, [] { pdl_entry(); });
}

template <class T, int M, bool Norm, int Pre, bool Glu>
__global__ void __launch_bounds__(kWarps * 32, min_blocks<M, Pre>()) gemv_split_kernel(const MatMulParams p, uint8_t* arena) {
  gemv_split_tile<T, M, Norm, Pre, Glu>(p, arena, blockIdx.x, [] { pdl_entry(); });
}

// RLX_GEMV_SPLIT=0 keeps one warp per row at every length (for measuring).
bool split_long_rows() {
  static const bool split = [] {
    const char* e = std::getenv("RLX_GEMV_SPLIT");
    return !(e && std::strcmp(e, "0") == 0);
  }();
  return split;
}

// x loaded a round at a time beside the weights (VectorRound's Pre) for up
// to this many rows; RLX_GEMV_PREFETCH=0 turns it off (for measuring).
constexpr int kPrefetchRows = 2;
bool prefetch_vector() {
  static const bool on = [] {
    const char* e = std::getenv("RLX_GEMV_PREFETCH");
    return !(e && std::strcmp(e, "0") == 0);
  }();
  return on;
}

// A fused norm's gain in shared memory (kPreGammaShared) up to this many
// bytes, the default block limit; RLX_GEMV_GAMMA_SHARED=0 keeps it in
// registers (for measuring; read per launch).
constexpr int64_t kGammaSharedBytes = 48 * 1024;
std::atomic<int64_t> g_gamma_shared_launches{0};
bool gamma_in_shared(const MatMulParams& p) {
  const char* e = std::getenv("RLX_GEMV_GAMMA_SHARED");
  return !(e && std::strcmp(e, "0") == 0) && p.k * int64_t(dtype_size(p.dtype)) <= kGammaSharedBytes;
}

// Which tile function covers p's output columns and how many tiles.
GemvTiles tiles_of(const MatMulParams& p, bool gamma_shared) {
  GemvTiles t;
  const int64_t es = int64_t(dtype_size(p.dtype)), cols = p.fused.out_cols(p.n);
  const int64_t per_block = p.fused.glu != Activation::None ? kWarps / 2 : kWarps;
  t.split = p.k * es / 16 > kRound && split_long_rows();
  t.tiles = t.split ? cols : (cols + per_block - 1) / per_block;
  t.smem = p.fused.norm_gamma != kNoBuffer && gamma_shared ? size_t(p.k * es) : 0;
  return t;
}

template <class T, int M, bool Norm, int Pre, bool Glu>
void launch_glu(const MatMulParams& plan, const LaunchContext& ctx) {
  MatMulParams p = plan;
  // Read once a pass, unless every batch entry reads the one weight.
  p.weights_evict_first = evict_first_weights(p.b_constant && (p.batch == 1 || p.stride_b != 0));
  const dim3 block(kWarps * 32);
  const GemvTiles t = tiles_of(p, Pre == kPreGammaShared);
  if (t.split)
    launch(gemv_split_kernel<T, M, Norm, Pre, Glu>, dim3(unsigned(t.tiles), unsigned(p.batch)), block, t.smem, ctx, p);
  else
    launch(gemv_kernel<T, M, Norm, Pre, Glu>, dim3(unsigned(t.tiles), unsigned(p.batch)), block, t.smem, ctx, p);
}

template <class T, int M, bool Norm, int Pre>
void launch_kernel(const MatMulParams& p, const LaunchContext& ctx) {
  if (p.fused.glu != Activation::None) launch_glu<T, M, Norm, Pre, true>(p, ctx);
  else launch_glu<T, M, Norm, Pre, false>(p, ctx);
}

template <class T, int M, bool Norm>
void launch_rows(const MatMulParams& p, const LaunchContext& ctx) {
  if constexpr (M <= kGemvMaxRows) {
    if (p.m == M) {
      if constexpr (M <= kPrefetchRows) {
        if (prefetch_vector()) {
          if constexpr (Norm)
            if (gamma_in_shared(p)) {
              ++g_gamma_shared_launches;
              return launch_kernel<T, M, Norm, kPreGammaShared>(p, ctx);
            }
          return launch_kernel<T, M, Norm, kPreRegisters>(p, ctx);
        }
      }
      return launch_kernel<T, M, Norm, kPreNone>(p, ctx);
    }
    launch_rows<T, M + 1, Norm>(p, ctx);
  }
}

bool aligned16(uint64_t v) { return v % 16 == 0; }

}  // namespace

bool gemv_eligible(const MatMulParams& p, const uint8_t* arena) {
  if (p.dtype != DType::F32 && p.dtype != DType::F16 && p.dtype != DType::BF16) return false;
  const uint64_t es = dtype_size(p.dtype), base = reinterpret_cast<uint64_t>(arena);
  return p.m >= 1 && p.m <= kGemvMaxRows && p.n >= 1 && p.k >= 1 && p.batch >= 1 && p.batch <= 65535 &&
         !p.trans_a && p.trans_b && p.n <= (int64_t(1) << 30) &&
         // Whole 16-byte chunks: rows of x and W start aligned and k fills them.
         aligned16(base + p.a) && aligned16(base + p.b) && aligned16(uint64_t(p.k) * es) &&
         aligned16(uint64_t(p.lda) * es) && aligned16(uint64_t(p.ldb) * es) &&
         aligned16(uint64_t(p.stride_a) * es) && aligned16(uint64_t(p.stride_b) * es) &&
         (p.fused.norm_gamma == kNoBuffer || aligned16(base + p.fused.norm_gamma));
}

int64_t gemv_gamma_shared_launches() { return g_gamma_shared_launches.load(); }

bool gemv_chain_tiles(const MatMulParams& p, GemvTiles* out) {
  if ((p.dtype != DType::F16 && p.dtype != DType::BF16) || p.m != 1 || p.batch != 1 || !p.b_constant ||
      !prefetch_vector())
    return false;
  const bool norm = p.fused.norm_gamma != kNoBuffer;
  if (norm && !gamma_in_shared(p)) return false;
  *out = tiles_of(p, norm);
  return true;
}

void run_gemv(const MatMulParams& p, const LaunchContext& ctx) {
  dispatch_float(p.dtype, ctx.label, [&]<class T>() {
    if (p.fused.norm_gamma != kNoBuffer) launch_rows<T, 1, true>(p, ctx);
    else launch_rows<T, 1, false>(p, ctx);
  });
}

}  // namespace rlx::cuda
