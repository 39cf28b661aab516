// Elementwise a (op) b with broadcasting strides; out is contiguous.
#include "backends/cpu/cpu_parallel.h"
#include "backends/cpu/cpu_registry.h"
#include "backends/cpu/cpu_storage.h"

namespace rlx::cpu {
namespace {

inline float apply(BinaryOp op, float a, float b) {
  switch (op) {
    case BinaryOp::Add: return a + b;
    case BinaryOp::Sub: return a - b;
    case BinaryOp::Mul: return a * b;
    case BinaryOp::Div: return a / b;
  }
  return a;
}

template <class T> void binary(const BinaryParams& p, CpuContext& ctx) {
  const T* a = at<T>(ctx.arena(), p.a);
  const T* b = at<T>(ctx.arena(), p.b);
  T* out = at<T>(ctx.arena(), p.out);
  if (p.n == 0) return;
  // Rows over every dim but the last; the last dim is the inner loop.
  const int rank = p.rank;
  const int64_t inner = rank > 0 ? p.shape[rank - 1] : 1;
  const int64_t sa = rank > 0 ? p.stride_a[rank - 1] : 0, sb = rank > 0 ? p.stride_b[rank - 1] : 0;
  const int64_t rows = p.n / inner;
  parallel_for(rows, p.n > 32768, [&](int64_t r) {
    int64_t oa, ob;
    row_offsets(r, rank, p.shape, p.stride_a, p.stride_b, oa, ob);
    T* o = out + r * inner;
    for (int64_t c = 0; c < inner; ++c)
      o[c] = from_f32<T>(apply(p.op, to_f32(a[oa + c * sa]), to_f32(b[ob + c * sb])));
  });
}

// i32 add/sub (positions advanced on the device): exact, wrapping like the GPU.
void binary_i32(const BinaryParams& p, CpuContext& ctx) {
  const int32_t* a = at<int32_t>(ctx.arena(), p.a);
  const int32_t* b = at<int32_t>(ctx.arena(), p.b);
  int32_t* out = at<int32_t>(ctx.arena(), p.out);
  for (int64_t i = 0; i < p.n; ++i) {
    int64_t rest = i, ia = 0, ib = 0;
    for (int d = p.rank - 1; d >= 0; --d) {
      const int64_t c = rest % p.shape[d];
      rest /= p.shape[d];
      ia += c * p.stride_a[d];
      ib += c * p.stride_b[d];
    }
    const uint32_t x = uint32_t(a[ia]), y = uint32_t(b[ib]);
    out[i] = int32_t(p.op == BinaryOp::Sub ? x - y : x + y);
  }
}

}  // namespace

void register_cpu_binary(CpuRegistry& r) {
  r.add<BinaryParams>(DType::F32, binary<float>);
  r.add<BinaryParams>(DType::F16, binary<Half>);
  r.add<BinaryParams>(DType::BF16, binary<BFloat>);
  r.add<BinaryParams>(DType::I32, binary_i32);
}

}  // namespace rlx::cpu
