// Fused SwiGLU / GeGLU: out = act(gate) * up (act silu or GELU, erf or tanh) over [rows, cols], gate and up read at
// an offset and row stride (the halves of one fused gate/up matmul row).
// One grid-stride loop over the output; f32 arithmetic. Where every row's
// gate, up and out start on 16 bytes (and fewer than 2^31 chunks), a thread
// takes a 16-byte chunk with 32-bit indexing: the element-wise loop's 64-bit
// division per element made it issue-bound (a 512-token prefill's SwiGLU,
// [512, 5632] f16, took 20.7 us against ~6 us to move its bytes).
// RLX_SWIGLU_VECTOR=0 keeps the element-wise loop (for measuring).
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "backends/cuda/cuda_registry.h"
#include "backends/cuda/device_types.cuh"
#include "backends/cuda/dispatch.h"
#include "backends/cuda/kernels.h"
#include "backends/cuda/launch.cuh"

namespace rlx::cuda {
namespace {

template <class T>
__global__ void swiglu_kernel(const SwiGluParams p, uint8_t* arena) {
  pdl_entry();
  const T* gate = at<const T>(arena, p.gate);
  const T* up = at<const T>(arena, p.up);
  T* out = at<T>(arena, p.out);
  const int64_t n = p.rows * p.cols;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / p.cols, c = i % p.cols;
    const float g = to_f32(gate[r * p.gate_stride + p.gate_offset + c]);
    const float u = to_f32(up[r * p.up_stride + p.up_offset + c]);
    out[i] = from_f32<T>(apply_activation(p.act, g) * u);
  }
}

template <class T>
__global__ void swiglu_chunks_kernel(const SwiGluParams p, uint8_t* arena) {
  pdl_entry();
  constexpr int ve = kChunkElems<T>;
  const T* gate = at<const T>(arena, p.gate) + p.gate_offset;
  const T* up = at<const T>(arena, p.up) + p.up_offset;
  T* out = at<T>(arena, p.out);
  const uint32_t per_row = uint32_t(p.cols / ve), n = uint32_t(p.rows) * per_row;
  const uint32_t gs = uint32_t(p.gate_stride), us = uint32_t(p.up_stride), os = uint32_t(p.cols);
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    const uint32_t r = i / per_row, c = (i - r * per_row) * ve;
    float g[ve], u[ve];
    unpack_chunk<T>(*reinterpret_cast<const uint4*>(gate + size_t(r) * gs + c), g);
    unpack_chunk<T>(*reinterpret_cast<const uint4*>(up + size_t(r) * us + c), u);
#pragma unroll
    for (int e = 0; e < ve; ++e) g[e] = apply_activation(p.act, g[e]) * u[e];
    *reinterpret_cast<uint4*>(out + size_t(r) * os + c) = pack_chunk<T>(g);
  }
}

bool vector_swiglu() {
  static const bool on = [] {
    const char* e = std::getenv("RLX_SWIGLU_VECTOR");
    return !(e && std::strcmp(e, "0") == 0);
  }();
  return on;
}

// Whole 16-byte chunks: every row of gate, up and out starts aligned (the
// arena base too, unless null: the arena is allocated 256-byte aligned).
bool chunked(const SwiGluParams& p, const uint8_t* arena) {
  const int64_t ve = 16 / int64_t(dtype_size(p.dtype));
  const uint64_t base = reinterpret_cast<uint64_t>(arena);
  return p.cols % ve == 0 && p.gate_stride % ve == 0 && p.up_stride % ve == 0 && p.gate_offset % ve == 0 &&
         p.up_offset % ve == 0 && (base + p.gate) % 16 == 0 && (base + p.up) % 16 == 0 && (base + p.out) % 16 == 0 &&
         p.rows * (p.cols / ve) < (int64_t(1) << 31) &&
         std::max({p.gate_stride, p.up_stride, p.cols}) < (int64_t(1) << 31);
}

void run_swiglu(const SwiGluParams& p, const LaunchContext& ctx) {
  dispatch_float(p.dtype, ctx.label, [&]<class T>() {
    if (vector_swiglu() && chunked(p, ctx.arena))
      launch(swiglu_chunks_kernel<T>, grid_for(p.rows * (p.cols / kChunkElems<T>), 256), 256, 0, ctx, p);
    else
      launch(swiglu_kernel<T>, grid_for(p.rows * p.cols, 256), 256, 0, ctx, p);
  });
}

}  // namespace

const char* swiglu_variant(const SwiGluParams& p, const uint8_t* arena) {
  return vector_swiglu() && chunked(p, arena) ? "vec" : "general";
}

void register_cuda_swiglu(CudaRegistry& r) {
  for (DType dt : kFloatDTypes) r.add<SwiGluParams>(dt, run_swiglu);
}

}  // namespace rlx::cuda
