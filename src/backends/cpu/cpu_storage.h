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

inline float to_f32(float v) { return v; }
inline float to_f32(Half v) { return half_to_float(v.bits); }
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

}  // namespace rlx::cpu
