// Embedding lookup: out[i, :] = table[ids[i], :]; an id outside the table
// gives a zero row rather than reading out of bounds. gather_q reads the
// rows of a block-quantized table (a tied LM head's Q8_0 weight) and
// dequantizes only them, so the table is never expanded to floats.
#include <cstring>

#include "backends/cpu/cpu_parallel.h"
#include "backends/cpu/cpu_quant_rows16.h"
#include "backends/cpu/cpu_registry.h"
#include "backends/cpu/cpu_storage.h"
#include "backends/cpu/cpu_weight_packs.h"
#include "thunks/quant_math.h"

namespace rlx::cpu {
namespace {

void gather(const GatherParams& p, CpuContext& ctx) {
  uint8_t* arena = ctx.arena();
  const uint8_t* table = arena + p.table;
  const int32_t* ids = at<int32_t>(arena, p.ids);
  uint8_t* out = arena + p.out;
  const uint64_t row_bytes = uint64_t(p.row) * dtype_size(p.dtype);
  parallel_for(p.n_ids, p.n_ids * p.row > 65536, [&](int64_t i) {
    const int32_t id = ids[i];
    if (id >= 0 && id < p.vocab)
      std::memcpy(out + uint64_t(i) * row_bytes, table + uint64_t(id) * row_bytes, row_bytes);
    else
      std::memset(out + uint64_t(i) * row_bytes, 0, row_bytes);  // zero in every dtype
  });
}

// Each row dequantized by the host reference (thunks/quant_math.h), the
// values the loader's f32 table held: d * q (+ m), one f32 rounding. A
// tied LM head's table may be interleaved for its product
// (cpu_quant_rows16.h): its rows' blocks are then read from there.
template <class T> void gather_q(const GatherQParams& p, CpuContext& ctx) {
  uint8_t* arena = ctx.arena();
  WeightPacks* packs = ctx.weight_packs();
  const int64_t rows16 = packs && packs->quant_rows16_as(p.quants, p.vocab, p.row, arena) ? rows16_rows(p.vocab) : 0;
  const uint8_t* quants = arena + p.quants;
  const uint16_t* scales = at<uint16_t>(arena, p.scales);
  const int32_t* ids = at<int32_t>(arena, p.ids);
  T* out = at<T>(arena, p.out);
  const int64_t row_bytes = p.row / kQuantBlock * quant_block_bytes(p.quant);
  const int64_t row_scales = p.row / kQuantBlock * quant_scales_per_block(p.quant);
  parallel_for(p.n_ids, p.n_ids * p.row > 65536, [&](int64_t i) {
    const int32_t id = ids[i];
    T* o = out + i * p.row;
    if (id < 0 || id >= p.vocab) {
      for (int64_t j = 0; j < p.row; ++j) o[j] = from_f32<T>(0.f);
      return;
    }
    float block[kQuantBlock];
    uint8_t q[32];
    uint16_t s[2];
    for (int64_t c = 0; c < p.row / kQuantBlock; ++c) {
      if (id < rows16) {
        rows16_block(p.quant, quants, scales, p.row, id, c, q, s);
        dequantize_row(p.quant, q, s, kQuantBlock, block);
      } else {
        dequantize_row(p.quant, quants + id * row_bytes + c * quant_block_bytes(p.quant),
                       scales + id * row_scales + c * quant_scales_per_block(p.quant), kQuantBlock, block);
      }
      for (int64_t j = 0; j < kQuantBlock; ++j) o[c * kQuantBlock + j] = from_f32<T>(block[j]);
    }
  });
}

}  // namespace

void register_cpu_gather(CpuRegistry& r) {
  for (DType dt : {DType::F32, DType::F16, DType::BF16, DType::I32}) r.add<GatherParams>(dt, gather);
}

void register_cpu_gather_q(CpuRegistry& r) {
  r.add<GatherQParams>(DType::F32, gather_q<float>);
  r.add<GatherQParams>(DType::F16, gather_q<Half>);
  r.add<GatherQParams>(DType::BF16, gather_q<BFloat>);
}

}  // namespace rlx::cpu
