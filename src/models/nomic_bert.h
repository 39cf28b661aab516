// NomicBERT (model_type nomic_bert: nomic-embed-text-v1/v1.5) as nomic's
// modeling_hf_nomic_bert.py runs it: word and token-type embeddings, emb_ln,
// then post-norm layers of a fused Wqkv with rotary positions on q and k
// (halves rotated unless rotary_emb_interleaved), out_proj, norm1, a gated
// MLP fc2(fc11(x) * silu(fc12(x))) and norm2; biases only where the config
// asks for them. The tensor names are those of nomic's checkpoints.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "models/hf_config.h"
#include "models/json_read.h"
#include "rlx/graph.h"

namespace rlx {

// Reads nomic's config.json keys (n_embd, n_head, n_layer, n_inner, ...)
// into c. What this builder does not run (prenorm, causal, partial or
// scaled rotary, RMS norm, ungated MLPs) is refused naming the field.
void read_nomic_bert_config(const JsonField& j, BertConfig& c);

// The stack from token ids to the last hidden state [batch, seq, hidden];
// types is read when token_types; positions is i32 [seq] counting from 0.
ValueId build_nomic_bert_stack(Graph& g, const BertConfig& c, ValueId ids, bool token_types, ValueId types,
                               ValueId mask, ValueId positions, DType dt);

// Every tensor the stack reads, with its shape: checked against the file
// before a graph is built.
std::vector<std::pair<std::string, Shape>> nomic_bert_tensors(const BertConfig& c);

}  // namespace rlx
