#include "models/encoder_demo.h"

#include "models/bert.h"
#include "rlx/error.h"

namespace rlx {

BertConfig encoder_demo_config(const EncoderShape& s) {
  auto in = [](const char* what, int v, int lo, int hi) {
    RLX_CHECK(v >= lo && v <= hi, "encoder demo: " << what << " " << v << " is outside [" << lo << ", " << hi << "]");
  };
  in("layers", s.layers, 0, 1024);
  in("hidden", s.hidden, 1, 1 << 16);
  in("heads", s.heads, 1, s.hidden);
  in("ffn", s.ffn, 1, 1 << 18);
  in("vocab", s.vocab, 1, 1 << 22);
  in("max_positions", s.max_positions, 1, 1 << 16);
  in("batch", s.batch, 1, 1 << 20);
  in("seq", s.seq, 1, 1 << 20);
  RLX_CHECK(s.hidden % s.heads == 0,
            "encoder demo: hidden " << s.hidden << " is not a multiple of heads " << s.heads);
  RLX_CHECK(s.seq <= s.max_positions,
            "encoder demo: seq " << s.seq << " exceeds max_positions " << s.max_positions);
  BertConfig c;
  c.model_type = "bert";
  c.vocab_size = s.vocab;
  c.hidden_size = s.hidden;
  c.num_hidden_layers = s.layers;
  c.num_attention_heads = s.heads;
  c.intermediate_size = s.ffn;
  c.hidden_act = Activation::Gelu;
  c.layer_norm_eps = 1e-12f;
  c.max_position_embeddings = s.max_positions;
  return c;
}

Graph build_encoder_demo(const EncoderShape& s) {
  BertGraphParts parts;
  parts.token_types = false;  // no tokenizer, so no segment ids
  parts.pooled = false;
  // Pooling is unused without the pooled output.
  return build_bert_graph(encoder_demo_config(s), Pooling::Cls, s.batch, s.seq, s.dtype, parts);
}

}  // namespace rlx
