// The pass pipeline compile() runs. Fusions (and the sibling-matmul merge,
// which exists to feed them) run only when CompileOptions::fuse is set; the
// device (Auto resolved by compile) picks what lowers per backend.
#include "compile/passes.h"
#include "rlx/options.h"

namespace rlx {

void run_passes(Graph& g, const CompileOptions& opts) {
  eliminate_dead_code(g);
  if (opts.fuse) merge_sibling_matmuls(g);
  fold_constants(g);
  if (opts.fuse) {
    fuse_matmul_epilogue(g);
    fuse_matvec(g);  // before fuse_add_norm: a decode step's residual adds go into its products
    fuse_add_norm(g);
    fuse_head_norm_rope(g);  // before fuse_narrow: the rope then reads the product's slice in place
    fuse_narrow(g);
    // The GPU's matrix-vector kernels gate in their epilogue, saving the
    // SwiGLU kernel and a write of both halves; the CPU would only run the
    // same work in another place.
    if (opts.device == Device::Cuda) {
      eliminate_dead_code(g);  // the narrows fuse_narrow folded away still read the product
      fuse_matvec_glu(g);
    }
    fuse_kv_write(g);  // after fuse_narrow: a rope's K slice is then its offset
    fuse_rope_attention(g);
  }
  if (opts.device == Device::Cpu) keep_products_quantized(g);
  eliminate_dead_code(g);
}

}  // namespace rlx
