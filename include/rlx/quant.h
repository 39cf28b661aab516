// Block-quantized weights as rlx holds them. A weight W [n, k] (a matmul's
// B in the [out, in] layout) is two tensors:
//   quants: i32 [n, k / quant_elems_per_word(type)], each row's blocks back
//           to back; scales: f16 [n, k / 32 * quant_scales_per_block(type)],
//           per block of 32 along k its scale (Q4_1: its scale, then its
//           minimum).
// Q8_0: block c of a row is bytes [32c, 32c+32), element 32c+j = d * q_j
//       with q_j the signed byte j.
// Q4_0: block c is bytes [16c, 16c+16); byte j holds element 32c+j in its
//       low nibble and element 32c+j+16 in its high nibble, each stored as
//       q + 8 (q in [-8, 7]); element = d * q.
// Q4_1: Q4_0's nibbles, each q in [0, 15]; element = d * q + m.
// FP8: Q8_0's layout; byte j is an OCP e4m3 (E4M3FN) code and element
//       32c+j = d * e4m3(q_j) (rlx/fp8.h), d = amax / 448 of the block.
// The nibble order is GGUF's, so a GGUF tensor is repacked by splitting its
// 18-, 20- or 34-byte blocks into quants and scales. Why split: GGUF's blocks are
// not 16-byte aligned, rows of bare quants are (16 or 32 bytes per block),
// so a kernel streams them in 16-byte loads and reads the scales apart.
#pragma once
#include <cstdint>
#include <string_view>

#include "rlx/enums.h"

namespace rlx {

constexpr int64_t kQuantBlock = 32;  // weights per scale, along k

constexpr bool quant_is_4bit(QuantType t) { return t == QuantType::Q4_0 || t == QuantType::Q4_1; }
constexpr int64_t quant_elems_per_word(QuantType t) { return quant_is_4bit(t) ? 8 : 4; }
constexpr int64_t quant_block_bytes(QuantType t) { return quant_is_4bit(t) ? 16 : 32; }
// f16 values per block in the scales: d, or d and m.
constexpr int64_t quant_scales_per_block(QuantType t) { return t == QuantType::Q4_1 ? 2 : 1; }

constexpr std::string_view quant_type_name(QuantType t) {
  return t == QuantType::Q4_0 ? "q4_0" : t == QuantType::Q4_1 ? "q4_1" : t == QuantType::FP8 ? "fp8" : "q8_0";
}

// "q8_0" / "q4_0" / "q4_1" / "fp8" (either case); false for anything else.
inline bool parse_quant_type(std::string_view s, QuantType* out) {
  auto lower = [](std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if ((a[i] >= 'A' && a[i] <= 'Z' ? char(a[i] - 'A' + 'a') : a[i]) != b[i]) return false;
    return true;
  };
  if (lower(s, "q8_0")) *out = QuantType::Q8_0;
  else if (lower(s, "q4_0")) *out = QuantType::Q4_0;
  else if (lower(s, "q4_1")) *out = QuantType::Q4_1;
  else if (lower(s, "fp8")) *out = QuantType::FP8;
  else return false;
  return true;
}

}  // namespace rlx
