// Element-type dispatch: maps a runtime DType to a C++ element type. The same
// tables decide what the backend claims to support.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <string>

#include "rlx/dtype.h"
#include "rlx/error.h"
#include "rlx/graph.h"  // Activation

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

// Calls f.template operator()<A>() for the activation act: a kernel that
// applies one activation to many elements takes it as a template argument.
template <class F>
void dispatch_activation(Activation act, F&& f) {
  switch (act) {
    case Activation::None: f.template operator()<Activation::None>(); return;
    case Activation::Gelu: f.template operator()<Activation::Gelu>(); return;
    case Activation::GeluTanh: f.template operator()<Activation::GeluTanh>(); return;
    case Activation::Silu: f.template operator()<Activation::Silu>(); return;
    case Activation::Relu: f.template operator()<Activation::Relu>(); return;
    case Activation::Tanh: f.template operator()<Activation::Tanh>(); return;
  }
  throw Error("CUDA backend: unknown activation " + std::to_string(int(act)));
}

}  // namespace rlx::cuda
