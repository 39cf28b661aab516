// Matmul weights packed once for the packed GEMM (cpu_gemm_packed.h): made on
// a product's first run and kept until the arena bytes they were read from
// are written again (set_param, write_binding, constants copied back in).
// One set per arena, shared by every executable on it as the weights are.
// Costs one more f32 copy of each weight that takes the packed path (bf16
// weights: a bf16 copy, in pairs, where the bf16 kernel runs).
#pragma once
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "thunks/params.h"

namespace rlx::cpu {

class WeightPacks {
 public:
  // The packed op(B) of p (batch entry 0) read from `arena`: packed now when
  // there is none for this operand or its bytes were written since. f32, or
  // bf16 pairs (uint32_t words) where packs_bf16_pairs(p.dtype), or with
  // `int8` quantized per column (pack_weights_int8's uint32_t words).
  const float* get(const MatMulParams& p, const uint8_t* arena, bool int8 = false);
  // The arena's bytes [offset, offset + size) are about to be written: packs
  // read from any of them are stale, and interleaved quantized weights among
  // them are put back in the row layout first (the write may cover part).
  void invalidate(uint64_t offset, uint64_t size);

  // matmul_q's weights W [n, k] at p.quants / p.scales interleaved in place
  // (cpu_quant_rows16.h), now if they are not yet.
  void quant_rows16(const MatMulQParams& p, uint8_t* arena);
  // The weights whose quants start at `quants` in the row layout, put back
  // now if they were interleaved (for the kernels that read rows).
  void quant_plain(uint64_t quants, uint8_t* arena);
  // Whether the weights whose quants start at `quants` are interleaved now
  // as an [n, k] weight (interleaved as another shape: put back, false).
  // The answer holds until the next quant_plain or invalidate: callers run
  // on the thread that runs the executables sharing this arena.
  bool quant_rows16_as(uint64_t quants, int64_t n, int64_t k, uint8_t* arena);
  uint64_t quant_packs_made() const { return quant_packs_made_; }
  uint64_t packs_made() const { return packs_made_; }
  uint64_t bytes() const;

 private:
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  struct Entry {
    uint64_t lo = 0, hi = 0;  // source bytes
    int64_t n = 0, k = 0, ldb = 0;
    bool trans_b = false;
    DType dtype = DType::F32;
    bool int8 = false;
    std::unique_ptr<float, Free> data;
    bool valid = false;
  };
  // Quantized weights interleaved in place, by their quants' offset.
  struct QuantEntry {
    uint64_t scales = 0;
    int64_t n = 0, k = 0;
    QuantType quant = QuantType::Q8_0;
    bool rows16 = false;
  };
  void put_back(uint64_t quants, QuantEntry& e, uint8_t* arena);
  mutable std::mutex mu_;
  std::vector<Entry> entries_;
  std::unordered_map<uint64_t, QuantEntry> quant_;
  uint8_t* quant_arena_ = nullptr;  // where quant_ lives (one arena per set)
  uint64_t packs_made_ = 0, quant_packs_made_ = 0;
};

// Bytes of the arena that op(B) of p spans for batch entry 0: [lo, hi).
void weight_span(const MatMulParams& p, uint64_t* lo, uint64_t* hi);

}  // namespace rlx::cpu
