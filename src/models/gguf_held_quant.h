// GGUF tensor types rlx holds in one of its own block formats (rlx/quant.h),
// so that the weights of a K-quant or 5-bit file stay quantized where the
// kernels have no format of their own for them:
//   Q5_0 as Q8_0, exactly: the same scale, each q - 16 as a signed byte;
//   Q4_K as Q4_1: each sub-block of 32 a block of its own, its nibbles as
//     they are, its scale d * sc and minimum -dmin * m rounded to f16 (a
//     relative 2^-11 of each, against the format's own step of 1/15 of the
//     sub-block's range);
//   Q5_1, Q5_K and Q6_K requantized to Q8_0 from their values (llama.cpp's
//     Q8_0 rounding: at most amax / 254 of each block of 32 added, about a
//     quarter of Q6_K's own step).
// Q2_K and Q3_K are expanded to floats, as before.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "models/gguf.h"
#include "models/llama_quant.h"
#include "rlx/quant.h"

namespace rlx {

// The format a tensor of type t is held in; nullopt: floats.
std::optional<QuantType> held_quant_type(GgmlType t);
// Whether t is one of rlx's formats as it is (Q8_0, Q4_0, Q4_1: its
// blocks are split into quants and scales, nothing else).
bool held_as_stored(GgmlType t);
// Whether held_blocks converts t's blocks (else the tensor is requantized
// from its values).
bool held_from_blocks(GgmlType t);
// t's blocks as GGUF blocks of held_quant_type(t) (ggml's block_q8_0 /
// block_q4_1 layout), for a type held_from_blocks.
std::vector<uint8_t> held_blocks(GgmlType t, std::span<const uint8_t> blocks);

// Fills the quants and scales of s (llama_quant.h: s.quant is
// held_quant_type of the tensor's type) from GGUF tensor `tensor` of f:
// its blocks as they are, converted, or requantized from its values.
void load_held_quant(const ParamSink& sink, const LlamaParamSource& s, const GgufFile& f, const std::string& tensor);

}  // namespace rlx
