// Elementwise kernels: broadcasting binary ops, activations, and the strided
// converting copy that narrow/permute/cast/concat lower to.
#include "backends/cuda/device_types.cuh"
#include "backends/cuda/cuda_registry.h"
#include "backends/cuda/dispatch.h"
#include "backends/cuda/launch.cuh"
#include "backends/cuda/kernels.h"

namespace rlx::cuda {
namespace {

constexpr int kBlock = 256;

// Element offsets of output index i in the two (broadcast) operands.
__device__ __forceinline__ void binary_offsets(const BinaryParams& p, int64_t i, int64_t& ia, int64_t& ib) {
  ia = 0;
  ib = 0;
  for (int d = p.rank - 1; d >= 0; --d) {
    int64_t c = i % p.shape[d];
    i /= p.shape[d];
    ia += c * p.stride_a[d];
    ib += c * p.stride_b[d];
  }
}

__device__ __forceinline__ float binary_apply(BinaryOp op, float x, float y) {
  switch (op) {
    case BinaryOp::Add: return x + y;
    case BinaryOp::Sub: return x - y;
    case BinaryOp::Mul: return x * y;
    default: return x / y;
  }
}

template <class T>
__global__ void binary_kernel(const BinaryParams p, uint8_t* arena) {
  pdl_entry();
  const T* a = at<const T>(arena, p.a);
  const T* b = at<const T>(arena, p.b);
  T* out = at<T>(arena, p.out);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < p.n;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t ia, ib;
    binary_offsets(p, i, ia, ib);
    out[i] = from_f32<T>(binary_apply(p.op, to_f32(a[ia]), to_f32(b[ib])));
  }
}

// Operands contiguous along the last axis, in whole 16-byte chunks (BERT's
// embeddings sum, [batch, seq, hidden] + [seq, hidden]): a chunk a thread, the
// broadcast offsets computed once per chunk, not per element.
template <class T>
__global__ void binary_vec_kernel(const BinaryParams p, uint8_t* arena) {
  pdl_entry();
  constexpr int ve = kChunkElems<T>;
  const T* a = at<const T>(arena, p.a);
  const T* b = at<const T>(arena, p.b);
  uint4* out = at<uint4>(arena, p.out);
  const int64_t chunks = p.n / ve;
  for (int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; c < chunks; c += int64_t(gridDim.x) * blockDim.x) {
    int64_t ia, ib;
    binary_offsets(p, c * ve, ia, ib);
    float x[ve], y[ve];
    unpack_chunk<T>(*reinterpret_cast<const uint4*>(a + ia), x);
    unpack_chunk<T>(*reinterpret_cast<const uint4*>(b + ib), y);
#pragma unroll
    for (int e = 0; e < ve; ++e) x[e] = binary_apply(p.op, x[e], y[e]);
    out[c] = pack_chunk<T>(x);
  }
}

// i32 add/sub (positions advanced on the device): exact, wrapping.
__global__ void binary_i32_kernel(const BinaryParams p, uint8_t* arena) {
  pdl_entry();
  const int32_t* a = at<const int32_t>(arena, p.a);
  const int32_t* b = at<const int32_t>(arena, p.b);
  int32_t* out = at<int32_t>(arena, p.out);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < p.n;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t ia, ib;
    binary_offsets(p, i, ia, ib);
    const uint32_t x = uint32_t(a[ia]), y = uint32_t(b[ib]);
    out[i] = int32_t(p.op == BinaryOp::Sub ? x - y : x + y);
  }
}

template <class T>
__global__ void unary_kernel(const UnaryParams p, uint8_t* arena) {
  pdl_entry();
  const T* x = at<const T>(arena, p.x);
  T* out = at<T>(arena, p.out);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < p.n;
       i += int64_t(gridDim.x) * blockDim.x)
    out[i] = from_f32<T>(apply_activation(p.act, to_f32(x[i])));
}

// Element offsets of index i in the source and destination.
__device__ __forceinline__ void copy_offsets(const CopyParams& p, int64_t i, int64_t& is, int64_t& id) {
  is = 0;
  id = 0;
  for (int d = p.rank - 1; d >= 0; --d) {
    int64_t c = i % p.shape[d];
    i /= p.shape[d];
    is += c * p.src_stride[d];
    id += c * p.dst_stride[d];
  }
}

// Same dtype: move the bits (exact for i32 beyond 2^24 and for NaN payloads).
template <class Bits>
__global__ void copy_bits_kernel(const CopyParams p, uint8_t* arena) {
  pdl_entry();
  const Bits* src = at<const Bits>(arena, p.src);
  Bits* dst = at<Bits>(arena, p.dst);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < p.n;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t is, id;
    copy_offsets(p, i, is, id);
    dst[id] = src[is];
  }
}

template <class S, class D>
__global__ void copy_convert_kernel(const CopyParams p, uint8_t* arena) {
  pdl_entry();
  const S* src = at<const S>(arena, p.src);
  D* dst = at<D>(arena, p.dst);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < p.n;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t is, id;
    copy_offsets(p, i, is, id);
    dst[id] = from_f32<D>(to_f32(src[is]));
  }
}

bool binary_vec_eligible(const BinaryParams& p, const uint8_t* arena) {
  if (p.dtype == DType::I32 || p.rank < 1) return false;
  const int64_t ve = 16 / int64_t(dtype_size(p.dtype));
  const int last = p.rank - 1;
  if (p.shape[last] % ve != 0 || p.stride_a[last] != 1 || p.stride_b[last] != 1) return false;
  for (int d = 0; d < last; ++d)
    if (p.stride_a[d] % ve != 0 || p.stride_b[d] % ve != 0) return false;
  for (uint64_t off : {p.a, p.b, p.out})
    if ((reinterpret_cast<uintptr_t>(arena) + off) % 16 != 0) return false;
  return true;
}

}  // namespace

const char* binary_variant(const BinaryParams& p, const uint8_t* arena) {
  return binary_vec_eligible(p, arena) ? "vec" : "general";
}

void run_binary(const BinaryParams& p, const LaunchContext& ctx) {
  if (p.dtype == DType::I32) {
    launch(binary_i32_kernel, grid_for(p.n, kBlock), kBlock, 0, ctx, p);
    return;
  }
  dispatch_float(p.dtype, ctx.label, [&]<class T>() {
    if (binary_vec_eligible(p, ctx.arena))
      launch(binary_vec_kernel<T>, grid_for(p.n / kChunkElems<T>, kBlock), kBlock, 0, ctx, p);
    else
      launch(binary_kernel<T>, grid_for(p.n, kBlock), kBlock, 0, ctx, p);
  });
}

void run_unary(const UnaryParams& p, const LaunchContext& ctx) {
  dispatch_float(p.dtype, ctx.label, [&]<class T>() {
    launch(unary_kernel<T>, grid_for(p.n, kBlock), kBlock, 0, ctx, p);
  });
}

void run_copy(const CopyParams& p, const LaunchContext& ctx) {
  unsigned grid = grid_for(p.n, kBlock);
  if (p.src_dtype == p.dst_dtype) {
    if (dtype_size(p.src_dtype) == 4)
      launch(copy_bits_kernel<uint32_t>, grid, kBlock, 0, ctx, p);
    else
      launch(copy_bits_kernel<uint16_t>, grid, kBlock, 0, ctx, p);
    return;
  }
  dispatch_any(p.src_dtype, ctx.label, [&]<class S>() {
    dispatch_any(p.dst_dtype, ctx.label, [&]<class D>() {
      launch(copy_convert_kernel<S, D>, grid, kBlock, 0, ctx, p);
    });
  });
}

void register_cuda_binary(CudaRegistry& r) {
  for (DType dt : kFloatDTypes) r.add<BinaryParams>(dt, run_binary);
  r.add<BinaryParams>(DType::I32, run_binary);  // add and sub only (shape inference)
}

void register_cuda_unary(CudaRegistry& r) {
  for (DType dt : kFloatDTypes) r.add<UnaryParams>(dt, run_unary);
}

// Keyed by the source dtype; any of the four converts to any other.
void register_cuda_copy(CudaRegistry& r) {
  for (DType dt : kAnyDTypes) r.add<CopyParams>(dt, run_copy);
}

}  // namespace rlx::cuda
