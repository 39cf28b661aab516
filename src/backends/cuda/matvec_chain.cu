#include "backends/cuda/matvec_chain.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "backends/cuda/chain_sync.cuh"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/dispatch.h"
#include "backends/cuda/gemv.h"
#include "backends/cuda/gemv_tiles.cuh"
#include "backends/cuda/launch.cuh"

namespace rlx::cuda {
namespace {

using namespace gemv_tiles;
using namespace chain_sync;

enum ChainVariant : uint8_t { kSplit = 1, kNorm = 2, kGlu = 4 };

using ChainParams = ChainLaunch<MatMulParams, kMaxChainOps>;
using ChainOp = ChainParams::Op;
static_assert(sizeof(ChainParams) <= 4000, "a chain's ops travel as kernel parameters");

// This block's tiles of one op; `wait` runs once, before the first tile
// reads the arena (after its weight loads), or alone if the block has none.
template <class T, int Blocks, bool Split, bool Norm, bool Glu, class Wait>
__device__ __forceinline__ void run_tiles(const ChainOp& op, uint8_t* arena, Wait wait) {
  constexpr int Pre = Norm ? kPreGammaShared : Blocks >= 5 ? kPreNone : kPreRegisters;
  bool first = true;
  for (int64_t t = blockIdx.x; t < op.tiles; t += gridDim.x) {
    if (!first) __syncthreads();  // the last tile's shared sums are read before they are overwritten
    auto once = [&] {
      if (first) wait();
    };
    if constexpr (Split) gemv_split_tile<T, 1, Norm, Pre, Glu, true>(op.p, arena, t, once, first);
    else gemv_row_tile<T, 1, Norm, Pre, Glu, true>(op.p, arena, t, once, first);
    first = false;
  }
  if (first) wait();
}

template <class T, int Blocks, class Wait>
__device__ __forceinline__ void run_op(const ChainOp& op, uint8_t* arena, Wait wait) {
  switch (op.variant) {
    case 0: return run_tiles<T, Blocks, false, false, false>(op, arena, wait);
    case kSplit: return run_tiles<T, Blocks, true, false, false>(op, arena, wait);
    case kNorm: return run_tiles<T, Blocks, false, true, false>(op, arena, wait);
    case kSplit | kNorm: return run_tiles<T, Blocks, true, true, false>(op, arena, wait);
    case kGlu: return run_tiles<T, Blocks, false, false, true>(op, arena, wait);
    case kSplit | kGlu: return run_tiles<T, Blocks, true, false, true>(op, arena, wait);
    case kNorm | kGlu: return run_tiles<T, Blocks, false, true, true>(op, arena, wait);
    default: return run_tiles<T, Blocks, true, true, true>(op, arena, wait);
  }
}

template <class T, int Blocks>
__global__ void __launch_bounds__(kWarps * 32, Blocks)
    matvec_chain_kernel(const __grid_constant__ ChainParams c, uint8_t* arena) {
  const unsigned long long target = launch_target(c.counters + kMaxChainOps);
  run_op<T, Blocks>(c.op[0], arena, [] { pdl_entry(); });
  for (int i = 1; i < c.ops; ++i) {
    arrive(c.counters + i - 1);
    run_op<T, Blocks>(c.op[i], arena, [&] { wait_for(c.counters + i - 1, target, i, c.backoff_ns); });
  }
}

template <class T>
auto chain_kernel(int blocks) {
  return blocks == 5 ? matvec_chain_kernel<T, 5> : matvec_chain_kernel<T, 4>;
}

// Blocks an SM the kernel is built for: 4 (126 registers, x prefetched a
// round at a time as the one-row kernels do) or 5 (96 registers; products
// without a norm load x beside the weights, as they would not fit).
// RLX_MATVEC_CHAIN_BLOCKS=5 picks the second (for measuring).
int chain_blocks_per_sm() {
  const char* e = std::getenv("RLX_MATVEC_CHAIN_BLOCKS");
  return e && std::strcmp(e, "5") == 0 ? 5 : 4;
}

// A cooperative launch has every block resident at once or fails: two
// chains on two streams cannot each hold part of the GPU and wait on each
// other. RLX_MATVEC_CHAIN_COOPERATIVE=0 launches without it (for measuring).
bool chain_cooperative() {
  const char* e = std::getenv("RLX_MATVEC_CHAIN_COOPERATIVE");
  return !(e && std::strcmp(e, "0") == 0);
}

uint8_t variant_of(const MatMulParams& p, const GemvTiles& t) {
  return uint8_t((t.split ? kSplit : 0) | (p.fused.norm_gamma != kNoBuffer ? kNorm : 0) |
                 (p.fused.glu != Activation::None ? kGlu : 0));
}

std::atomic<int64_t> g_chain_launches{0};

struct Dims {
  int64_t most_tiles = 0;
  size_t smem = 0;
};

class DenseChain final : public MatVecChain {
 public:
  DenseChain(const std::vector<MatMulParams>& ops, int blocks, const void* kernel, const Dims& d)
      : MatVecChain(ops.size(), kernel, kWarps * 32, d.smem, d.most_tiles), blocks_(blocks) {
    params_.ops = int32_t(ops.size());
    params_.counters = counters_;
    params_.backoff_ns = backoff_ns_;
    for (size_t i = 0; i < ops.size(); ++i) {
      GemvTiles t;
      gemv_chain_tiles(ops[i], &t);
      params_.op[i].p = ops[i];
      params_.op[i].tiles = t.tiles;
      params_.op[i].variant = variant_of(ops[i], t);
    }
    smem_ = d.smem;
  }
  void execute(const LaunchContext& ctx) const override {
    ChainParams c = params_;
    for (int i = 0; i < c.ops; ++i) c.op[i].p.weights_evict_first = evict_first_weights(true);
    dispatch_float(c.op[0].p.dtype, ctx.label, [&]<class T>() {
      if constexpr (!std::is_same_v<T, float>)
        launch(chain_kernel<T>(blocks_), dim3(unsigned(grid_)), dim3(kWarps * 32), smem_, ctx, c, 1, cooperative_);
    });
    count_matvec_chain_launch();
  }

 private:
  ChainParams params_{};
  int blocks_;
  size_t smem_ = 0;
};

}  // namespace

bool matvec_chains_enabled() {
  const char* e = std::getenv("RLX_MATVEC_CHAIN");
  if (e && (std::strcmp(e, "0") == 0 || std::strcmp(e, "1") == 0)) return *e == '1';
  return kMatVecChainsByDefault;
}

bool matvec_chain_accepts(const MatMulParams& p) {
  GemvTiles t;
  return gemv_chain_tiles(p, &t);
}

MatVecChain::MatVecChain(size_t size, const void* kernel, int threads, size_t smem, int64_t most_tiles)
    : size_(size), cooperative_(chain_cooperative()) {
  if (const char* e = std::getenv("RLX_MATVEC_CHAIN_BACKOFF_NS")) backoff_ns_ = uint32_t(std::strtoul(e, nullptr, 10));
  RLX_CHECK(size >= 2 && size <= size_t(kMaxChainOps), "matvec chain of " << size << " products");
  int per_sm = 0;
  check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem), "matvec chain occupancy");
  RLX_CHECK(per_sm >= 1, "matvec chain: no block fits an SM");
  grid_ = int(std::min<int64_t>(int64_t(per_sm) * multiprocessor_count(), most_tiles));
  check(cudaMalloc(&counters_, (kMaxChainOps + 1) * sizeof(unsigned long long)), "matvec chain counters");
  check(cudaMemset(counters_, 0, (kMaxChainOps + 1) * sizeof(unsigned long long)), "matvec chain counters");
}

MatVecChain::~MatVecChain() {
  if (counters_) cudaFree(counters_);
}

std::unique_ptr<MatVecChain> make_matvec_chain(const std::vector<MatMulParams>& ops) {
  RLX_CHECK(!ops.empty(), "matvec chain of no products");
  const DType dtype = ops[0].dtype;
  Dims d;
  for (const MatMulParams& p : ops) {
    GemvTiles t;
    RLX_CHECK(gemv_chain_tiles(p, &t) && p.dtype == dtype, "matvec chain: a product it cannot run");
    d.most_tiles = std::max(d.most_tiles, t.tiles);
    d.smem = std::max(d.smem, t.smem);
  }
  const int blocks = chain_blocks_per_sm();
  const void* kernel = nullptr;
  dispatch_float(dtype, "matvec chain", [&]<class T>() {
    if constexpr (!std::is_same_v<T, float>) kernel = reinterpret_cast<const void*>(chain_kernel<T>(blocks));
  });
  RLX_CHECK(kernel, "matvec chain: no kernel for " << dtype_name(dtype));
  return std::make_unique<DenseChain>(ops, blocks, kernel, d);
}

void count_matvec_chain_launch() { ++g_chain_launches; }
int64_t matvec_chain_launches() { return g_chain_launches.load(); }

}  // namespace rlx::cuda
