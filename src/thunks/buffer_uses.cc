// One overload per params struct: what its kernel touches, from its sizes,
// offsets and strides. Ranges are conservative (a strided view counts from
// its base to its last element).
#include "thunks/buffer_uses.h"

#include "rlx/quant.h"

namespace rlx {
namespace {

using Uses = std::vector<BufferUse>;

uint64_t bytes(int64_t elements, DType dt) { return elements > 0 ? uint64_t(elements) * dtype_size(dt) : 0; }

// Elements from the first to one past the last of a strided iteration space.
int64_t strided_extent(int32_t rank, const int64_t* shape, const int64_t* stride) {
  int64_t last = 0;
  for (int32_t d = 0; d < rank; ++d) {
    if (shape[d] == 0) return 0;
    last += (shape[d] - 1) * stride[d];
  }
  return last + 1;
}

// Rows `rows` apart by `stride` elements, `width` elements from `offset`.
int64_t rows_extent(int64_t rows, int64_t stride, int64_t offset, int64_t width) {
  return rows > 0 && width > 0 ? (rows - 1) * stride + offset + width : 0;
}

void read(Uses& u, uint64_t at, uint64_t n) {
  if (at != kNoBuffer) u.push_back({at, n, false});
}
void write(Uses& u, uint64_t at, uint64_t n) {
  if (at != kNoBuffer) u.push_back({at, n, true});
}

Uses uses(const MatMulParams& p) {
  Uses u;
  const int64_t a_rows = p.trans_a ? p.k : p.m, a_cols = p.trans_a ? p.m : p.k;
  const int64_t b_rows = p.trans_b ? p.n : p.k, b_cols = p.trans_b ? p.k : p.n;
  read(u, p.a, bytes((p.batch - 1) * p.stride_a + rows_extent(a_rows, p.lda, 0, a_cols), p.dtype));
  read(u, p.b, bytes((p.batch - 1) * p.stride_b + rows_extent(b_rows, p.ldb, 0, b_cols), p.dtype));
  read(u, p.bias, bytes(p.n, p.dtype));
  const uint64_t out_bytes =
      bytes((p.batch - 1) * p.stride_out + rows_extent(p.m, p.ldc, 0, p.fused.out_cols(p.n)), p.dtype);
  read(u, p.fused.norm_gamma, bytes(p.k, p.dtype));
  read(u, p.fused.residual, out_bytes);
  write(u, p.out, out_bytes);
  return u;
}

Uses uses(const MatMulQParams& p) {
  Uses u;
  read(u, p.x, bytes(p.m * p.k, p.dtype));
  read(u, p.quants, bytes(p.n * p.k / quant_elems_per_word(p.quant), DType::I32));
  read(u, p.scales, bytes(p.n * p.k / kQuantBlock * quant_scales_per_block(p.quant), DType::F16));
  read(u, p.bias, bytes(p.n, p.dtype));
  read(u, p.fused.norm_gamma, bytes(p.k, p.dtype));
  read(u, p.fused.residual, bytes(p.m * p.n, p.dtype));
  write(u, p.out, bytes(p.m * p.fused.out_cols(p.n), p.dtype));
  write(u, p.dequantized, bytes(p.n * p.k, p.dtype));
  return u;
}

Uses uses(const BinaryParams& p) {
  Uses u;
  read(u, p.a, bytes(strided_extent(p.rank, p.shape, p.stride_a), p.dtype));
  read(u, p.b, bytes(strided_extent(p.rank, p.shape, p.stride_b), p.dtype));
  write(u, p.out, bytes(p.n, p.dtype));
  return u;
}

Uses uses(const UnaryParams& p) { return {{p.x, bytes(p.n, p.dtype), false}, {p.out, bytes(p.n, p.dtype), true}}; }

Uses uses(const NormParams& p) {
  Uses u;
  const uint64_t all = bytes(p.rows * p.cols, p.dtype), row = bytes(p.cols, p.dtype);
  read(u, p.x, all);
  read(u, p.residual, all);
  read(u, p.gamma, row);
  read(u, p.beta, row);
  read(u, p.add_after, all);
  write(u, p.out, all);
  write(u, p.sum_out, all);
  return u;
}

Uses uses(const SoftmaxParams& p) {
  return {{p.x, bytes(p.rows * p.cols, p.dtype), false}, {p.out, bytes(p.rows * p.cols, p.dtype), true}};
}

Uses uses(const AttentionParams& p) {
  Uses u;
  const int64_t q_rows = p.batch * p.sq, kv_rows = (p.kv_slots != kNoBuffer ? p.kv_batch : p.batch) * p.skv;
  read(u, p.q, bytes(rows_extent(q_rows, p.q_stride, p.q_offset, int64_t(p.q_heads) * p.head_dim), p.dtype));
  read(u, p.k, bytes(rows_extent(kv_rows, p.k_stride, p.k_offset, int64_t(p.kv_heads) * p.head_dim), p.dtype));
  read(u, p.v, bytes(rows_extent(kv_rows, p.v_stride, p.v_offset, int64_t(p.kv_heads) * p.head_dim), p.dtype));
  if (p.mask_kind == MaskKind::Padding) read(u, p.mask, bytes(kv_rows, DType::I32));
  read(u, p.pos, bytes(p.batch, DType::I32));
  read(u, p.kv_slots, bytes(p.batch, DType::I32));
  write(u, p.out, bytes(q_rows * p.q_heads * p.head_dim, p.dtype));
  return u;
}

Uses uses(const RopeParams& p) {
  Uses u;
  const int64_t rows = p.batch * p.seq, width = int64_t(p.heads) * p.head_dim;
  read(u, p.x, bytes(rows_extent(rows, p.stride, p.offset, width), p.dtype));
  read(u, p.pos, bytes(p.pos_start ? p.batch : p.pos_batched ? rows : p.seq, DType::I32));
  read(u, p.gamma, bytes(p.head_dim, p.dtype));
  write(u, p.out, bytes(rows * width, p.dtype));
  return u;
}

Uses uses(const GatherParams& p) {
  return {{p.table, bytes(p.vocab * p.row, p.dtype), false},
          {p.ids, bytes(p.n_ids, DType::I32), false},
          {p.out, bytes(p.n_ids * p.row, p.dtype), true}};
}

Uses uses(const GatherQParams& p) {
  return {{p.quants, bytes(p.vocab * p.row / quant_elems_per_word(p.quant), DType::I32), false},
          {p.scales, bytes(p.vocab * p.row / kQuantBlock * quant_scales_per_block(p.quant), DType::F16), false},
          {p.ids, bytes(p.n_ids, DType::I32), false},
          {p.out, bytes(p.n_ids * p.row, p.dtype), true}};
}

Uses uses(const AllReduceParams& p) {
  return {{p.x, bytes(p.n, p.dtype), false}, {p.out, bytes(p.n, p.dtype), true}};
}

Uses uses(const AllGatherParams& p) {
  return {{p.x, bytes(p.n, p.dtype), false}, {p.out, bytes(p.n * p.ranks, p.dtype), true}};
}

Uses uses(const CopyParams& p) {
  return {{p.src, bytes(strided_extent(p.rank, p.shape, p.src_stride), p.src_dtype), false},
          {p.dst, bytes(strided_extent(p.rank, p.shape, p.dst_stride), p.dst_dtype), true}};
}

Uses uses(const ReduceParams& p) {
  return {{p.x, bytes(p.outer * p.len * p.inner, p.dtype), false}, {p.out, bytes(p.outer * p.inner, p.dtype), true}};
}

Uses uses(const SoftmaxCEParams& p) {
  return {{p.logits, bytes(p.rows * p.classes, p.dtype), false},
          {p.labels, bytes(p.rows, DType::I32), false},
          {p.out, bytes(p.rows, p.dtype), true}};
}

Uses uses(const SwiGluParams& p) {
  return {{p.gate, bytes(rows_extent(p.rows, p.gate_stride, p.gate_offset, p.cols), p.dtype), false},
          {p.up, bytes(rows_extent(p.rows, p.up_stride, p.up_offset, p.cols), p.dtype), false},
          {p.out, bytes(p.rows * p.cols, p.dtype), true}};
}

// The rows land at positions read at run time: any row of the cache may be written.
Uses uses(const KvWriteParams& p) {
  Uses u;
  read(u, p.rows, bytes(rows_extent(p.batch * p.n_new, p.rows_stride, p.rows_offset, p.row), p.dtype));
  read(u, p.pos, bytes(p.batch, DType::I32));
  read(u, p.slots, bytes(p.batch, DType::I32));
  read(u, p.gamma, bytes(p.head_dim, p.dtype));
  write(u, p.cache, bytes(p.cache_batch * p.max_ctx * p.row, p.dtype));
  return u;
}

Uses uses(const ArgmaxParams& p) {
  return {{p.x, bytes(p.rows * p.cols, p.dtype), false}, {p.out, bytes(p.rows, DType::I32), true}};
}

Uses uses(const SampleParams& p) {
  return {{p.x, bytes(p.rows * p.cols, p.dtype), false},
          {p.positions, bytes(p.rows, DType::I32), false},
          {p.out, bytes(p.rows, DType::I32), true}};
}

Uses uses(const MoeRouteParams& p) {
  return {{p.logits, bytes(p.rows * p.experts, p.dtype), false},
          {p.ids, bytes(p.rows * p.k, DType::I32), true},
          {p.weights, bytes(p.rows * p.k, p.dtype), true}};
}

// The ids are read at run time: any expert's rows may be read.
Uses uses(const MoeMatMulParams& p) {
  Uses u;
  read(u, p.x, bytes((p.rows - 1) * p.x_row_stride + (p.top_k - 1) * p.x_choice_stride + p.k, p.dtype));
  read(u, p.w, bytes(p.experts * p.n * p.k, p.dtype));
  read(u, p.ids, bytes(p.rows * p.top_k, DType::I32));
  read(u, p.weights, bytes(p.rows * p.top_k, p.dtype));
  write(u, p.out, bytes(p.rows * (p.weights == kNoBuffer ? p.top_k : 1) * p.n, p.dtype));
  return u;
}

Uses uses(const MoeMatMulQParams& p) {
  Uses u;
  const int64_t rows = p.experts * p.n;
  read(u, p.x, bytes((p.rows - 1) * p.x_row_stride + (p.top_k - 1) * p.x_choice_stride + p.k, p.dtype));
  read(u, p.quants, bytes(rows * p.k / quant_elems_per_word(p.quant), DType::I32));
  read(u, p.scales, bytes(rows * p.k / kQuantBlock * quant_scales_per_block(p.quant), DType::F16));
  read(u, p.ids, bytes(p.rows * p.top_k, DType::I32));
  read(u, p.weights, bytes(p.rows * p.top_k, p.dtype));
  write(u, p.out, bytes(p.rows * (p.weights == kNoBuffer ? p.top_k : 1) * p.n, p.dtype));
  return u;
}

}  // namespace

std::vector<BufferUse> declared_uses(const ThunkParams& p) {
  return std::visit([](const auto& q) { return uses(q); }, p);
}

}  // namespace rlx
