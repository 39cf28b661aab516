// Element-type dispatch: maps a runtime DType to a C++ element type. The same
// tables decide what the backend claims to support.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <string>

#include "rlx/dtype.h"
#include "rlx/error.h"

namespace rlx::cuda {

// The dtypes dispatch_float and dispatch_any cover: what families register.
constexpr DType kFloatDTypes[] = {DType::F32, DType::F16, DType::BF16};
constexpr DType kAnyDTypes[] = {DType::F32, DType::F16, DType::BF16, DType::I32};

// Calls f.template operator()<T>() for the float element type of dt.
template <class F>
void dispatch_float(DType dt, const char* what, F&& f) {
  switch (dt) {
    case DType::F32: f.template operator()<float>(); return;
    case DType::F16: f.template operator()<__half>(); return;
    case DType::BF16: f.template operator()<__nv_bfloat16>(); return;
    default: break;
  }
  throw Error(std::string("CUDA backend: ") + what + " has no kernel for dtype " +
              std::string(dtype_name(dt)));
}

// As dispatch_float, with i32 too.
template <class F>
void dispatch_any(DType dt, const char* what, F&& f) {
  if (dt == DType::I32) {
    f.template operator()<int32_t>();
    return;
  }
  dispatch_float(dt, what, f);
}

}  // namespace rlx::cuda
