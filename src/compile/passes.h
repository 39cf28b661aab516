// Graph passes, one per file in src/compile/passes/. Each rewrites the graph
// in place: removed nodes are marked dead, new nodes are appended (lowering
// orders nodes topologically), uses are redirected with Graph::replace_uses.
#pragma once
#include "rlx/graph.h"

namespace rlx {

struct CompileOptions;

void eliminate_dead_code(Graph& g);        // nodes no output depends on
void merge_sibling_matmuls(Graph& g);      // x@Wq, x@Wk, x@Wv -> x@concat(W) + narrows
void fold_constants(Graph& g);             // constant-only subgraphs evaluated once
void fuse_matmul_epilogue(Graph& g);       // matmul + bias add + activation
void fuse_matvec(Graph& g);                // rms norm before / residual add after a decode-step product
void fuse_add_norm(Graph& g);              // residual add + layer/rms norm -> add_norm; norm + add -> add_after
void fuse_head_norm_rope(Graph& g);       // a per-head rms norm (q/k norm) into the rope after it
void fuse_narrow(Graph& g);                // narrow(last axis) into rope/attention strides
void fuse_matvec_glu(Graph& g);            // swiglu after a decode-step gate/up product (GPU backends)
void fuse_kv_write(Graph& g);              // rope(K) and K/V slices into the kv_write reading them
void fuse_rope_attention(Graph& g);        // rope(q) into a decode step's attention
void keep_products_quantized(Graph& g);    // matmul_q without a dequantized W (host backends)

// The pipeline compile() runs (fusions only when opts.fuse).
void run_passes(Graph& g, const CompileOptions& opts);

}  // namespace rlx
