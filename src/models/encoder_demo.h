// A BERT-shaped encoder built from the public graph API with unfused ops,
// for inspecting the compiler and benchmarking without model files.
#pragma once
#include "rlx/graph.h"

namespace rlx {

struct EncoderShape {
  int layers = 12, hidden = 768, heads = 12, ffn = 3072, vocab = 30522, max_positions = 512;
  int batch = 1, seq = 128;
  DType dtype = DType::F32;
};

// Inputs: input_ids, attention_mask (i32 [batch, seq]). Output: hidden [batch, seq, hidden].
Graph build_encoder_demo(const EncoderShape& s);

}  // namespace rlx
