// Device-side element access: every kernel computes in f32 and converts on
// load and store, so one template body serves f32, f16 and bf16.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "rlx/dtype.h"
#include "rlx/enums.h"

namespace rlx::cuda {

__device__ __forceinline__ float to_f32(float v) { return v; }
__device__ __forceinline__ float to_f32(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_f32(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_f32(int32_t v) { return float(v); }

template <class T> __device__ __forceinline__ T from_f32(float v);
template <> __device__ __forceinline__ float from_f32<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_f32<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <> __device__ __forceinline__ int32_t from_f32<int32_t>(float v) { return int32_t(v); }

// A typed pointer at a byte offset into the arena.
template <class T>
__device__ __forceinline__ T* at(uint8_t* arena, uint64_t offset) {
  return reinterpret_cast<T*>(arena + offset);
}

// 16 bytes of T (8 halves, 8 bfloat16s or 4 floats) to and from f32, for
// kernels that move rows in 16-byte chunks.
template <class T>
constexpr int kChunkElems = 16 / int(sizeof(T));

// The NW words as floats: one each in f32, two each in f16/bf16.
template <class T, int NW>
__device__ __forceinline__ void unpack_words(const uint32_t (&w)[NW], float* f) {
#pragma unroll
  for (int i = 0; i < NW; ++i) {
    if constexpr (sizeof(T) == 4) {
      f[i] = __uint_as_float(w[i]);
    } else if constexpr (std::is_same_v<T, __half>) {
      __half2 h;
      memcpy(&h, &w[i], 4);
      const float2 t = __half22float2(h);
      f[2 * i] = t.x, f[2 * i + 1] = t.y;
    } else {
      f[2 * i] = __uint_as_float(w[i] << 16);
      f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    }
  }
}

template <class T>
__device__ __forceinline__ void unpack_chunk(const uint4& u, float* f) {
  const uint32_t w[4] = {u.x, u.y, u.z, u.w};
  unpack_words<T, 4>(w, f);
}

template <class T>
__device__ __forceinline__ uint4 pack_chunk(const float* f) {
  uint32_t w[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if constexpr (sizeof(T) == 4) {
      w[i] = __float_as_uint(f[i]);
    } else if constexpr (std::is_same_v<T, __half>) {
      const __half2 h = __floats2half2_rn(f[2 * i], f[2 * i + 1]);
      memcpy(&w[i], &h, 4);
    } else {
      const __nv_bfloat162 h = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
      memcpy(&w[i], &h, 4);
    }
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// erf-GELU, x * Phi(x), with Phi(-u) = 2^q(u) for u = |x|: q is a degree-10
// fit of log2 Phi(-u) on [0, 5.5] (error < 3e-7; past 5.5, Phi(-u) < 2e-8
// is taken as 0). One MUFU and no range switch: ~20 instructions a value
// against ~27 for 0.5x(1 + erff(x/sqrt 2)), whose nine selects made the GELU
// pass issue-bound. No cancellation for x < 0 either: relative error < 2e-6
// everywhere (erff's form loses up to 5e-4 near x = -4), and f16 results
// are the exactly rounded ones for 99.87% of all f16 inputs (erff: 99.48%).
__device__ __forceinline__ float gelu_erf(float x) {
  constexpr float kU = 5.5f;
  const float a = fabsf(x), u = fminf(a, kU);  // fminf drops a NaN: x carries it
  const float t = fmaf(u, 2.f / kU, -1.f);     // [0, 5.5] -> [-1, 1]
  float q = -4.200294124e-04f;
  q = fmaf(q, t, 6.348171708e-04f);
  q = fmaf(q, t, 7.276918542e-04f);
  q = fmaf(q, t, -3.718287149e-03f);
  q = fmaf(q, t, 1.110329608e-02f);
  q = fmaf(q, t, -3.104926335e-02f);
  q = fmaf(q, t, 7.799541031e-02f);
  q = fmaf(q, t, -1.833374272e-01f);
  q = fmaf(q, t, -5.023928776e+00f);
  q = fmaf(q, t, -1.210763943e+01f);
  q = fmaf(q, t, -8.390586563e+00f);
  if (a > kU) q = -200.f;  // 2^-200 flushes to 0
  float e;                 // Phi(-u)
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(q));
  const float h = copysignf(u, x) * e;  // x * Phi(-u), and 0 (not inf * 0) for |x| = inf
  return x < 0.f ? h : x - h;
}

template <Activation A>
__device__ __forceinline__ float activate(float x) {
  if constexpr (A == Activation::Gelu) return gelu_erf(x);
  else if constexpr (A == Activation::GeluTanh) {
    float inner = 0.7978845608028654f * (x + 0.044715f * x * x * x);
    return 0.5f * x * (1.f + tanhf(inner));
  } else if constexpr (A == Activation::Silu) return x / (1.f + expf(-x));
  else if constexpr (A == Activation::Relu) return x > 0.f ? x : 0.f;
  else if constexpr (A == Activation::Tanh) return tanhf(x);
  else return x;
}

// The activation chosen at run time; a kernel applying one activation to
// many elements takes it as a template argument instead (dispatch_activation),
// so its loop has no switch.
__device__ __forceinline__ float apply_activation(Activation act, float x) {
  switch (act) {
    case Activation::None: return x;
    case Activation::Gelu: return activate<Activation::Gelu>(x);
    case Activation::GeluTanh: return activate<Activation::GeluTanh>(x);
    case Activation::Silu: return activate<Activation::Silu>(x);
    case Activation::Relu: return activate<Activation::Relu>(x);
    case Activation::Tanh: return activate<Activation::Tanh>(x);
  }
  return x;
}

// Programmatic dependent launch (launch.cuh): every kernel launched through
// launch() calls this before it reads or writes the arena. It first lets the
// next kernel in the stream launch (its blocks take SM slots as this grid's
// drain, issue their constant-weight loads and wait here in turn), then waits
// until the kernel before it has finished and its writes are visible. So the
// next product's first weight loads overlap this kernel's whole run, not
// only its tail. A grid launches only once every block of the one before it
// has started, so waiting blocks never keep an earlier grid's blocks out.
// Building with -DRLX_PDL_LATE_TRIGGER lets the next kernel launch only after
// the wait (as before; for measuring). A no-op without the launch attribute.
__device__ __forceinline__ void pdl_entry() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#ifdef RLX_PDL_LATE_TRIGGER
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" :::);
#else
  asm volatile("griddepcontrol.launch_dependents;" :::);
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
#endif
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Block-wide reductions for blocks of up to 1024 threads; every thread gets
// the result. `scratch` holds 32 floats of shared memory.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : 0.f;
  return warp_sum(v);
}

__device__ __forceinline__ float block_max(float v, float* scratch) {
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : -INFINITY;
  return warp_max(v);
}

}  // namespace rlx::cuda
