// A run of consecutive one-row matrix-vector products of a decode step (the
// output, gate/up and down products of a layer and the next layer's QKV)
// in one launch: a grid that fits the GPU at once takes each product's
// tiles in turn, and between two products every block waits on a counter
// in global memory (chain_sync.cuh) instead of a kernel boundary, with its
// first weight loads of the next product already in flight. Products over
// f16/bf16 weights chain with each other (gemv_tiles.cuh), quantized ones
// (Q8_0, Q4_0, FP8) with each other (gemv_quant_tiles.cuh).
// RLX_MATVEC_CHAIN=1 / 0 turns chains on / off (read at prepare);
// kMatVecChainsByDefault is the default.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "backends/cuda/launch_context.h"
#include "thunks/params.h"

namespace rlx::cuda {

constexpr int kMaxChainOps = 8;
// Off: measured 0.72x of the products one by one at f16 batch 1 on the
// H100 (PERF.md, "Matrix-vector chains measured: slower").
constexpr bool kMatVecChainsByDefault = false;

bool matvec_chains_enabled();

// What a thunk offers a chain: its one-row product, if a chain can run it
// (at most one of the two is set).
struct ChainableProduct {
  const MatMulParams* dense = nullptr;
  const MatMulQParams* quantized = nullptr;
  explicit operator bool() const { return dense || quantized; }
};
bool matvec_chain_accepts(const MatMulParams& p);
bool matvec_chain_accepts(const MatMulQParams& p);

class MatVecChain {
 public:
  virtual ~MatVecChain();
  MatVecChain(const MatVecChain&) = delete;
  MatVecChain& operator=(const MatVecChain&) = delete;

  virtual void execute(const LaunchContext& ctx) const = 0;
  size_t size() const { return size_; }
  int grid() const { return grid_; }

 protected:
  // kernel: the chain kernel, for its occupancy at `threads` and `smem`.
  MatVecChain(size_t size, const void* kernel, int threads, size_t smem, int64_t most_tiles);
  size_t size_;
  unsigned long long* counters_ = nullptr;  // device: kMaxChainOps arrivals, then the entry ticket
  int grid_ = 0;
  bool cooperative_ = true;
  uint32_t backoff_ns_ = 0;  // RLX_MATVEC_CHAIN_BACKOFF_NS (for measuring)
};

// ops: 2 to kMaxChainOps products, in schedule order, each accepted, of one
// dtype.
std::unique_ptr<MatVecChain> make_matvec_chain(const std::vector<MatMulParams>& ops);
std::unique_ptr<MatVecChain> make_matvec_chain(const std::vector<MatMulQParams>& ops);

// Chain launches so far (tests assert the chained path ran).
int64_t matvec_chain_launches();
void count_matvec_chain_launch();

}  // namespace rlx::cuda
