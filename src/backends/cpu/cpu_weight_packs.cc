#include "backends/cpu/cpu_weight_packs.h"

#include "backends/cpu/cpu_gemm_packed.h"
#include "backends/cpu/cpu_quant_rows16.h"
#include "backends/cpu/cpu_storage.h"
#include "rlx/error.h"

namespace rlx::cpu {

void weight_span(const MatMulParams& p, uint64_t* lo, uint64_t* hi) {
  const int64_t rows = p.trans_b ? p.n : p.k, cols = p.trans_b ? p.k : p.n;
  const uint64_t es = dtype_size(p.dtype);
  *lo = p.b;
  *hi = rows <= 0 || cols <= 0 ? p.b : p.b + uint64_t((rows - 1) * p.ldb + cols) * es;
}

namespace {
// Bytes of the packed form: int8 when asked, bf16 pairs where the bf16
// kernel takes this dtype, else f32.
uint64_t packed_bytes(int64_t n, int64_t k, DType dtype, bool int8) {
  if (int8) return uint64_t(packed_int8_words(n, k)) * sizeof(uint32_t);
  return packs_bf16_pairs(dtype) ? uint64_t(packed_bf16_words(n, k)) * sizeof(uint32_t)
                                 : uint64_t(packed_weights_floats(n, k)) * sizeof(float);
}
}  // namespace

const float* WeightPacks::get(const MatMulParams& p, const uint8_t* arena, bool int8) {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t lo = 0, hi = 0;
  weight_span(p, &lo, &hi);
  Entry* e = nullptr;
  for (Entry& x : entries_)
    if (x.lo == lo && x.hi == hi && x.n == p.n && x.k == p.k && x.ldb == p.ldb && x.trans_b == bool(p.trans_b) &&
        x.dtype == p.dtype && x.int8 == int8)
      e = &x;
  if (!e) {
    entries_.emplace_back();
    e = &entries_.back();
    e->lo = lo, e->hi = hi, e->n = p.n, e->k = p.k, e->ldb = p.ldb, e->trans_b = p.trans_b, e->dtype = p.dtype;
    e->int8 = int8;
    const size_t bytes = (size_t(packed_bytes(p.n, p.k, p.dtype, int8)) + 63) / 64 * 64;
    e->data.reset(static_cast<float*>(std::aligned_alloc(64, std::max<size_t>(bytes, 64))));
    RLX_CHECK(e->data, "cpu: cannot allocate " << bytes << " bytes of packed weights for the matmul at offset "
                                               << p.b);
  }
  if (!e->valid && int8) {
    with_float_type(p.dtype, [&](auto t) {
      using T = decltype(t);
      pack_weights_int8(reinterpret_cast<const T*>(arena + p.b), p.n, p.k, p.ldb, p.trans_b,
                        reinterpret_cast<uint32_t*>(e->data.get()));
    });
    e->valid = true;
    ++packs_made_;
  } else if (!e->valid && packs_bf16_pairs(p.dtype)) {
    pack_weights_bf16_pairs(reinterpret_cast<const BFloat*>(arena + p.b), p.n, p.k, p.ldb, p.trans_b,
                            reinterpret_cast<uint32_t*>(e->data.get()));
    e->valid = true;
    ++packs_made_;
  } else if (!e->valid) {
    with_float_type(p.dtype, [&](auto t) {
      using T = decltype(t);
      pack_weights(reinterpret_cast<const T*>(arena + p.b), p.n, p.k, p.ldb, p.trans_b, e->data.get());
    });
    e->valid = true;
    ++packs_made_;
  }
  return e->data.get();
}

void WeightPacks::invalidate(uint64_t offset, uint64_t size) {
  std::lock_guard<std::mutex> lock(mu_);
  for (Entry& e : entries_)
    if (offset < e.hi && e.lo < offset + size) e.valid = false;
  for (auto& [quants, e] : quant_) {
    if (!e.rows16) continue;
    const uint64_t qbytes = uint64_t(e.n * (e.k / kQuantBlock) * quant_block_bytes(e.quant));
    const uint64_t sbytes = uint64_t(e.n * (e.k / kQuantBlock) * quant_scales_per_block(e.quant)) * 2;
    const bool hit = (offset < quants + qbytes && quants < offset + size) ||
                     (offset < e.scales + sbytes && e.scales < offset + size);
    if (hit) put_back(quants, e, quant_arena_);
  }
}

void WeightPacks::put_back(uint64_t quants, QuantEntry& e, uint8_t* arena) {
  unpack_rows16(e.quant, arena + quants, reinterpret_cast<uint16_t*>(arena + e.scales), e.n, e.k);
  e.rows16 = false;
}

void WeightPacks::quant_rows16(const MatMulQParams& p, uint8_t* arena) {
  std::lock_guard<std::mutex> lock(mu_);
  quant_arena_ = arena;
  QuantEntry& e = quant_[p.quants];
  if (e.rows16) {
    RLX_CHECK(e.scales == p.scales && e.n == p.n && e.k == p.k && e.quant == p.quant,
              "cpu: the quantized weight at offset " << p.quants << " is read as two different matrices");
    return;
  }
  e.scales = p.scales, e.n = p.n, e.k = p.k, e.quant = p.quant;
  pack_rows16(p.quant, arena + p.quants, reinterpret_cast<uint16_t*>(arena + p.scales), p.n, p.k);
  e.rows16 = true;
  ++quant_packs_made_;
}

void WeightPacks::quant_plain(uint64_t quants, uint8_t* arena) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = quant_.find(quants);
  if (it != quant_.end() && it->second.rows16) put_back(quants, it->second, arena);
}

bool WeightPacks::quant_rows16_as(uint64_t quants, int64_t n, int64_t k, uint8_t* arena) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = quant_.find(quants);
  if (it == quant_.end() || !it->second.rows16) return false;
  if (it->second.n == n && it->second.k == k) return true;
  put_back(quants, it->second, arena);
  return false;
}

uint64_t WeightPacks::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t total = 0;
  for (const Entry& e : entries_) total += packed_bytes(e.n, e.k, e.dtype, e.int8);
  return total;
}

}  // namespace rlx::cpu
