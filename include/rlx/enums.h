// Small enums shared by the graph, the thunk params and device code.
#pragma once
#include <cstdint>

namespace rlx {

enum class Activation : uint8_t { None = 0, Gelu = 1, GeluTanh = 2, Silu = 3, Relu = 4, Tanh = 5 };
enum class BinaryOp : uint8_t { Add = 0, Sub = 1, Mul = 2, Div = 3 };
enum class NormKind : uint8_t { Layer = 0, Rms = 1 };
enum class MaskKind : uint8_t { None = 0, Causal = 1, Padding = 2 };
enum class ReduceKind : uint8_t { Sum = 0, Mean = 1, Max = 2 };
// Block-quantized weight formats (rlx/quant.h): 32 weights share one f16
// scale (Q4_1: a scale and a minimum). FP8: e4m3 codes times the scale.
enum class QuantType : uint8_t { Q8_0 = 0, Q4_0 = 1, Q4_1 = 2, FP8 = 3 };

}  // namespace rlx
