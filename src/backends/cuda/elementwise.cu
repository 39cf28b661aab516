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
    float x = to_f32(a[ia]), y = to_f32(b[ib]), r;
    switch (p.op) {
      case BinaryOp::Add: r = x + y; break;
      case BinaryOp::Sub: r = x - y; break;
      case BinaryOp::Mul: r = x * y; break;
      default: r = x / y; break;
    }
    out[i] = from_f32<T>(r);
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

}  // namespace

void run_binary(const BinaryParams& p, const LaunchContext& ctx) {
  if (p.dtype == DType::I32) {
    launch(binary_i32_kernel, grid_for(p.n, kBlock), kBlock, 0, ctx, p);
    return;
  }
  dispatch_float(p.dtype, ctx.label, [&]<class T>() {
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
