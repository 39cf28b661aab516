// Storage element types of the CPU kernels. Arithmetic is always f32; f16 and
// bf16 are widened on load and rounded (to nearest even) on store.
#pragma once
#include <cstdint>
#include <utility>

#include "rlx/dtype.h"
#include "rlx/error.h"

namespace rlx::cpu {

struct Half { uint16_t bits; };
struct BFloat { uint16_t bits; };
static_assert(sizeof(Half) == 2 && sizeof(BFloat) == 2);

// Every half value widened once: a lookup is several times faster than the
// bit manipulation of half_to_float, and widening f16 weights is hot.
struct HalfToFloatTable {
  float value[65536];
  HalfToFloatTable() {
    for (uint32_t i = 0; i < 65536; ++i) value[i] = half_to_float(uint16_t(i));
  }
};
inline const HalfToFloatTable kHalfToFloat;

inline float to_f32(float v) { return v; }
inline float to_f32(Half v) { return kHalfToFloat.value[v.bits]; }
inline float to_f32(BFloat v) { return bf16_to_float(v.bits); }

template <class T> inline T from_f32(float v);
template <> inline float from_f32<float>(float v) { return v; }
template <> inline Half from_f32<Half>(float v) { return Half{float_to_half(v)}; }
template <> inline BFloat from_f32<BFloat>(float v) { return BFloat{float_to_bf16(v)}; }

// Typed view of an arena buffer given its byte offset.
template <class T> inline T* at(uint8_t* arena, uint64_t offset) {
  return reinterpret_cast<T*>(arena + offset);
}

// Calls fn(T{}) with the storage type of a float dtype.
template <class Fn> decltype(auto) with_float_type(DType dt, Fn&& fn) {
  switch (dt) {
    case DType::F32: return fn(float{});
    case DType::F16: return fn(Half{});
    case DType::BF16: return fn(BFloat{});
    case DType::I32: break;
  }
  throw Error(std::string("cpu: expected a float dtype, got ") + std::string(dtype_name(dt)));
}

// Element offsets of row r (every dim but the last) of a strided iteration
// space under two stride sets, e.g. the two operands of a binary op.
inline void row_offsets(int64_t r, int rank, const int64_t* shape, const int64_t* s0, const int64_t* s1,
                        int64_t& o0, int64_t& o1) {
  o0 = o1 = 0;
  for (int d = rank - 2; d >= 0; --d) {
    int64_t i = r % shape[d];
    r /= shape[d];
    o0 += i * s0[d];
    o1 += i * s1[d];
  }
}

}  // namespace rlx::cpu
