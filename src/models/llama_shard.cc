#include "models/llama_shard.h"

#include "rlx/error.h"
#include "rlx/quant.h"

namespace rlx {

bool llama_splits_vocab(const LlamaConfig& c, int ranks) {
  return ranks > 1 && !c.tie_embeddings && c.vocab_size % ranks == 0;
}

LlamaConfig llama_rank_config(const LlamaConfig& whole, int ranks, const QuantizedWeights& quantized) {
  RLX_CHECK(ranks >= 1 && ranks <= 64, "tensor parallelism: " << ranks << " ranks (1 to 64)");
  RLX_CHECK(whole.tp_ranks == 0, "tensor parallelism: the config is already one rank's share");
  auto divides = [&](int64_t n, const char* field) {
    RLX_CHECK(n % ranks == 0, "tensor parallelism over " << ranks << " ranks: " << field << " " << n
                                                         << " is not a multiple of " << ranks);
  };
  divides(whole.num_heads, "num_attention_heads");
  // Fewer KV heads than ranks: ranks share KV heads (each holds one), when
  // the ranks of a KV head's query heads are whole.
  const int kv = whole.num_kv_heads;
  if (kv % ranks != 0)
    RLX_CHECK(ranks % kv == 0 && (whole.num_heads / kv) % (ranks / kv) == 0,
              "tensor parallelism over " << ranks << " ranks: num_key_value_heads " << kv
                                         << " neither splits over the ranks nor shares among them evenly");
  divides(whole.intermediate_size, "intermediate_size");
  if (whole.num_experts > 0) divides(whole.expert_ffn, "moe_intermediate_size (each expert's FFN rows)");
  // A quantized product split along its inputs keeps whole blocks per rank.
  const int64_t q_dim = int64_t(whole.num_heads) * whole.head_dim;
  for (const auto& [name, type] : quantized) {
    const bool out = name.find("attn_output.weight") != std::string::npos;
    const bool down = name.find("ffn_down.weight") != std::string::npos;
    const bool experts_down = name.find("ffn_down_exps.weight") != std::string::npos;
    if (!out && !down && !experts_down) continue;
    const int64_t cols = (out ? q_dim : experts_down ? whole.expert_ffn : whole.intermediate_size) / ranks;
    RLX_CHECK(cols % kQuantBlock == 0, "tensor parallelism over " << ranks << " ranks: '" << name << "' ("
                                                                  << quant_type_name(type) << ") would give each rank "
                                                                  << cols << " inputs, not whole blocks of "
                                                                  << kQuantBlock);
  }
  LlamaConfig c = whole;
  c.num_heads /= ranks;
  c.num_kv_heads = kv % ranks == 0 ? kv / ranks : 1;
  c.intermediate_size /= ranks;
  c.expert_ffn /= ranks;
  c.tp_ranks = ranks;
  c.tp_vocab = llama_splits_vocab(whole, ranks);
  return c;
}

std::map<std::string, ParamSlice> llama_param_slices(const LlamaConfig& c, int ranks) {
  const int64_t q_dim = int64_t(c.num_heads) * c.head_dim, kv_dim = int64_t(c.num_kv_heads) * c.head_dim;
  const int64_t F = c.intermediate_size;
  // K and V by KV head where ranks share them.
  const int kv_pieces = c.num_kv_heads % ranks == 0 ? 0 : c.num_kv_heads;
  std::map<std::string, ParamSlice> s;
  const ParamSlice rows{0, {}, {}}, cols{-1, {}, {}}, expert_rows{1, {}, {}}, kv_rows{0, {kv_dim}, {kv_pieces}};
  for (int l = 0; l < c.num_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    if (c.fused_qkv_gate_up) {
      s[p + "attn_qkv.weight"] = ParamSlice{0, {q_dim, kv_dim, kv_dim}, {0, kv_pieces, kv_pieces}};
      s[p + "ffn_up.weight"] = ParamSlice{0, {F, F}, {}};  // gate rows, then up rows
    } else {
      for (const char* w : {"attn_q", "attn_k", "attn_v"}) {
        const ParamSlice& by = w == std::string("attn_q") ? rows : kv_rows;
        s[p + w + ".weight"] = by;
        s[p + w + ".bias"] = by;
      }
      s[p + "ffn_gate.weight"] = rows;
      s[p + "ffn_up.weight"] = rows;
    }
    s[p + "attn_output.weight"] = cols;
    s[p + "ffn_down.weight"] = cols;
    // Experts [E, n, k]: each expert's FFN rows split as a dense FFN's.
    s[p + "ffn_gate_exps.weight"] = expert_rows;
    s[p + "ffn_up_exps.weight"] = expert_rows;
    s[p + "ffn_down_exps.weight"] = cols;
  }
  if (llama_splits_vocab(c, ranks)) s["output.weight"] = rows;
  return s;
}

std::vector<LlamaParamSource> llama_whole_sources(const Graph& g, const LlamaConfig& whole, TpRank tp) {
  std::vector<LlamaParamSource> sources = llama_param_sources(g);
  if (tp.ranks <= 1) return sources;
  const std::map<std::string, ParamSlice> slices = llama_param_slices(whole, tp.ranks);
  for (LlamaParamSource& s : sources) {
    auto it = slices.find(s.tensor);
    if (it == slices.end()) continue;
    const ParamSlice& sl = it->second;
    int64_t len = 0;  // the whole tensor's length along the split dim
    for (int64_t p : sl.parts) len += p;
    s.shape[sl.axis(s.shape.size())] = sl.parts.empty() ? s.shape[sl.axis(s.shape.size())] * tp.ranks : len;
  }
  return sources;
}

ParamSink llama_param_sink(Executable& exe, const LlamaConfig& whole, TpRank tp) {
  if (tp.ranks <= 1) return ParamSink(exe);
  return ParamSink(exe, tp, llama_param_slices(whole, tp.ranks));
}

}  // namespace rlx
