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
#include <vector>

#include "thunks/params.h"

namespace rlx::cpu {

class WeightPacks {
 public:
  // The packed op(B) of p (batch entry 0) read from `arena`: packed now when
  // there is none for this operand or its bytes were written since. f32, or
  // bf16 pairs (uint32_t words) where packs_bf16_pairs(p.dtype).
  const float* get(const MatMulParams& p, const uint8_t* arena);
  // The arena's bytes [offset, offset + size) changed: packs read from any
  // of them are stale.
  void invalidate(uint64_t offset, uint64_t size);
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
    std::unique_ptr<float, Free> data;
    bool valid = false;
  };
  mutable std::mutex mu_;
  std::vector<Entry> entries_;
  uint64_t packs_made_ = 0;
};

// Bytes of the arena that op(B) of p spans for batch entry 0: [lo, hi).
void weight_span(const MatMulParams& p, uint64_t* lo, uint64_t* hi);

}  // namespace rlx::cpu
