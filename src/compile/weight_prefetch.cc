#include "compile/weight_prefetch.h"

#include "rlx/quant.h"

namespace rlx {
namespace {

// Whole 16-byte units inside [offset, offset + bytes): what the bulk
// prefetch takes.
void add_range(L2Prefetch& f, int& n, uint64_t offset, uint64_t bytes) {
  const uint64_t begin = (offset + 15) / 16 * 16, end = (offset + bytes) / 16 * 16;
  if (end <= begin || n >= L2Prefetch::kRanges) return;
  f.offset[n] = begin;
  f.bytes[n++] = end - begin;
}

// A [rows, ...] matrix of `bytes`, in halves where the product fuses a glu:
// its blocks read gate row i and up row i + rows / 2 together, so the front
// of each half is what they read first.
void add_matrix(L2Prefetch& f, int& n, uint64_t offset, uint64_t bytes, bool halves) {
  if (!halves) return add_range(f, n, offset, bytes);
  add_range(f, n, offset, bytes / 2);
  add_range(f, n, offset + bytes / 2, bytes / 2);
}

}  // namespace

L2Prefetch product_weights(const ThunkParams& params) {
  L2Prefetch f;
  int n = 0;
  if (const auto* p = std::get_if<MatMulParams>(&params)) {
    if (!p->b_constant || !p->trans_b || p->batch != 1 || p->ldb != p->k) return f;
    add_matrix(f, n, p->b, uint64_t(p->n * p->k) * dtype_size(p->dtype), p->fused.glu != Activation::None);
  } else if (const auto* q = std::get_if<MatMulQParams>(&params)) {
    if (!q->weights_constant) return f;
    const bool halves = q->fused.glu != Activation::None;
    add_matrix(f, n, q->quants, uint64_t(q->n * q->k / quant_elems_per_word(q->quant)) * 4, halves);
    add_matrix(f, n, q->scales, uint64_t(q->n * q->k / kQuantBlock * quant_scales_per_block(q->quant)) * 2, halves);
  }
  return f;
}

void plan_weight_prefetch(Schedule& s) {
  std::vector<size_t> products;
  for (size_t i = 0; i < s.thunks.size(); ++i)
    if (product_weights(s.thunks[i].params).total() > 0) products.push_back(i);
  for (size_t j = 0; j < products.size(); ++j) {
    const L2Prefetch next = product_weights(s.thunks[products[(j + 1) % products.size()]].params);
    std::visit(
        [&](auto& p) {
          if constexpr (requires { p.next_weights; }) p.next_weights = next;
        },
        s.thunks[products[j]].params);
  }
}

}  // namespace rlx
