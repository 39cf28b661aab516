// A run of consecutive one-row matrix-vector products of a decode step (the
// output, gate/up and down products of a layer and the next layer's QKV)
// in one launch: a grid that fits the GPU at once takes each product's
// tiles (gemv_tiles.cuh) in turn, and between two products every block
// waits on a counter in global memory instead of a kernel boundary, with
// its first weight loads of the next product already in flight. The
// counters only grow: a launch takes a ticket on entry, so a replayed graph
// needs no clearing node. RLX_MATVEC_CHAIN=1 / 0 turns chains on / off
// (read at prepare); kMatVecChainsByDefault is the default.
#pragma once
#include <cstdint>
#include <vector>

#include "backends/cuda/launch_context.h"
#include "thunks/params.h"

namespace rlx::cuda {

constexpr int kMaxChainOps = 8;
// Off until measured faster on a GPU (docs/PERSISTENT_DECODE.md).
constexpr bool kMatVecChainsByDefault = false;

bool matvec_chains_enabled();
// Whether p can join a chain (gemv_chain_tiles).
bool matvec_chain_accepts(const MatMulParams& p);

class MatVecChain {
 public:
  // ops: at least two products, in schedule order, each accepted.
  explicit MatVecChain(const std::vector<MatMulParams>& ops);
  ~MatVecChain();
  MatVecChain(const MatVecChain&) = delete;
  MatVecChain& operator=(const MatVecChain&) = delete;

  void execute(const LaunchContext& ctx) const;
  size_t size() const { return ops_.size(); }
  int grid() const { return grid_; }

 private:
  std::vector<MatMulParams> ops_;
  DType dtype_;
  unsigned long long* counters_ = nullptr;  // device: kMaxChainOps arrivals, then the entry ticket
  int grid_ = 0;
  int blocks_ = 4;  // per SM the kernel is built for
  bool cooperative_ = true;
  size_t smem_ = 0;
};

// Chain launches so far (tests assert the chained path ran).
int64_t matvec_chain_launches();

}  // namespace rlx::cuda
