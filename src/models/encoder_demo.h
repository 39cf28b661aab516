// The demo encoder: the BERT graph (models/bert.h) at a chosen size, without
// token types or pooling, for inspecting the compiler and benchmarking
// without model files. Its params carry the BERT names; callers set them to
// random values.
#pragma once
#include "models/hf_config.h"
#include "rlx/graph.h"

namespace rlx {

struct EncoderShape {
  int layers = 12, hidden = 768, heads = 12, ffn = 3072, vocab = 30522, max_positions = 512;
  int batch = 1, seq = 128;
  DType dtype = DType::F32;
};

// The BERT config of a shape (GELU, eps 1e-12); throws naming the field
// that is out of range.
BertConfig encoder_demo_config(const EncoderShape& s);

// Inputs: input_ids, attention_mask (i32 [batch, seq]).
// Output: last_hidden_state [batch, seq, hidden].
Graph build_encoder_demo(const EncoderShape& s);

}  // namespace rlx
