// Strided copy with dtype conversion: narrow, permute, cast and concat.
#include <cmath>
#include <cstring>

#include "backends/cpu/cpu_parallel.h"
#include "backends/cpu/cpu_registry.h"
#include "backends/cpu/cpu_storage.h"

namespace rlx::cpu {
namespace {

// Float -> i32 truncates toward zero (like a C cast); NaN gives 0 and values
// beyond the range saturate instead of being undefined.
inline int32_t to_i32(float v) {
  if (std::isnan(v)) return 0;
  if (v >= 2147483647.f) return INT32_MAX;
  if (v <= -2147483648.f) return INT32_MIN;
  return int32_t(v);
}

void copy(const CopyParams& p, CpuContext& ctx) {
  uint8_t* arena = ctx.arena();
  const uint8_t* src = arena + p.src;
  uint8_t* dst = arena + p.dst;
  if (p.n == 0) return;
  const int rank = p.rank;
  const int64_t inner = rank > 0 ? p.shape[rank - 1] : 1;
  const int64_t ss = rank > 0 ? p.src_stride[rank - 1] : 0, ds = rank > 0 ? p.dst_stride[rank - 1] : 0;
  const int64_t rows = p.n / inner;
  const DType st = p.src_dtype, dt = p.dst_dtype;
  const size_t esize = dtype_size(st);
  parallel_for(rows, p.n > 65536, [&](int64_t r) {
    int64_t so, d_o;
    row_offsets(r, rank, p.shape, p.src_stride, p.dst_stride, so, d_o);
    if (st == dt) {  // bit-exact, i32 included
      if (ss == 1 && ds == 1) {
        std::memcpy(dst + size_t(d_o) * esize, src + size_t(so) * esize, size_t(inner) * esize);
      } else {
        for (int64_t c = 0; c < inner; ++c)
          std::memcpy(dst + size_t(d_o + c * ds) * esize, src + size_t(so + c * ss) * esize, esize);
      }
    } else if (dt == DType::I32) {
      for (int64_t c = 0; c < inner; ++c)
        reinterpret_cast<int32_t*>(dst)[d_o + c * ds] = to_i32(load_as_float(src, st, size_t(so + c * ss)));
    } else {
      for (int64_t c = 0; c < inner; ++c)
        store_from_float(dst, dt, size_t(d_o + c * ds), load_as_float(src, st, size_t(so + c * ss)));
    }
  });
}

}  // namespace

void register_cpu_copy(CpuRegistry& r) {
  for (DType dt : {DType::F32, DType::F16, DType::BF16, DType::I32}) r.add<CopyParams>(dt, copy);
}

}  // namespace rlx::cpu
