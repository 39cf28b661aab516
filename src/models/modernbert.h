// ModernBERT (model_type modernbert) as transformers' modeling_modernbert.py
// runs it: token embeddings and a norm (no positions, no token types), then
// pre-norm layers (layer 0 without attn_norm) of a fused Wqkv with rotary
// positions on q and k (halves; global_rope_theta on global layers,
// local_rope_theta on local ones), attention over every key on global layers
// and over the keys within local_attention / 2 on either side on local
// layers, Wo, mlp_norm, a GeGLU MLP Wo(act(input) * gate) with [input, gate]
// the halves of Wi, and a final_norm. Norms and linears have biases only
// where the config asks (norm_bias, attention_bias, mlp_bias).
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "models/hf_config.h"
#include "models/json_read.h"
#include "rlx/graph.h"

namespace rlx {

// Reads ModernBertConfig's keys into c: transformers 4.48+'s
// (global_attn_every_n_layers, global_rope_theta, local_rope_theta) and
// 5's (layer_types, rope_parameters). What the stack does not run (another
// RoPE type, a head_dim of its own, an unknown layer type) is refused
// naming the field.
void read_modernbert_config(const JsonField& j, BertConfig& c);

// The stack from token ids to the last hidden state [batch, seq, hidden]
// (after final_norm); positions is i32 [seq] counting from 0.
ValueId build_modernbert_stack(Graph& g, const BertConfig& c, ValueId ids, ValueId mask, ValueId positions,
                               DType dt);

// ModernBertForSequenceClassification's head over the last hidden state:
// logits [batch, num_labels].
ValueId build_modernbert_head(Graph& g, const BertConfig& c, ValueId x, ValueId mask, int64_t batch, int64_t seq,
                              DType dt);

// Every tensor the stack (and, for a classifier, its head) reads, with its
// shape: checked against the file before a graph is built.
std::vector<std::pair<std::string, Shape>> modernbert_tensors(const BertConfig& c);

}  // namespace rlx
