// The mixture-of-experts families' test models as real files: Qwen3-MoE and
// Mixtral configs of odd sizes (5 experts, 2 per token, expert FFN 37),
// random weights written as a Hugging Face directory (one tensor per
// expert, as the released checkpoints; or stacked under mlp.experts, as
// transformers 5 keeps them; in f32, f16 or bf16) and as a GGUF laid out as convert_hf_to_gguf.py
// writes the family (stacked blk.N.ffn_*_exps.weight).
#pragma once
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "models/decoder_family_files.h"
#include "models/moe.h"
#include "rlx/dtype.h"

namespace rlx::test {

// Qwen3's attention pieces (q/k norms, head_dim 40 free of 200 / 6 heads,
// GQA 6:3), three layers of which layer 1 is dense (mlp_only_layers).
inline Family qwen3_moe() {
  Family f = qwen3();
  f.name = "qwen3_moe";
  f.model_type = "qwen3_moe";
  LlamaConfig& c = f.cfg;
  c.family = "qwen3_moe";
  c.num_layers = 3;
  c.num_experts = 5;
  c.experts_per_token = 2;
  c.expert_ffn = 37;
  c.norm_topk_prob = true;
  c.moe_layers = {true, false, true};
  f.extra_json = R"(, "num_experts": 5, "num_experts_per_tok": 2, "moe_intermediate_size": 37,
    "norm_topk_prob": true, "decoder_sparse_step": 1, "mlp_only_layers": [1], "use_sliding_window": false,
    "sliding_window": null, "router_aux_loss_coef": 0.001, "output_router_logits": false)";
  return f;
}

// LLaMA's attention (GQA 6:2, head_dim 48), every layer sparse, untied head;
// Mixtral's experts are its FFN (intermediate_size).
inline Family mixtral() {
  Family f{"mixtral", "mixtral", odd_config(), R"(, "num_local_experts": 5, "num_experts_per_tok": 2,
    "sliding_window": null, "router_jitter_noise": 0.0)"};
  LlamaConfig& c = f.cfg;
  c.family = "mixtral";
  c.tie_embeddings = false;
  c.intermediate_size = 37;
  c.num_experts = 5;
  c.experts_per_token = 2;
  c.expert_ffn = 37;
  c.norm_topk_prob = true;
  return f;
}

enum class ExpertLayout { PerExpert, Stacked };

inline std::vector<float> rounded_to(const std::vector<float>& v, DType dt) {
  return dt == DType::F32 ? v : quantize(v, dt);
}

// A safetensors file of f32, f16 or bf16 tensors.
inline void write_safetensors_as(const fs::path& p, const std::map<std::string, std::pair<Shape, std::vector<float>>>& ts,
                                 DType dt) {
  std::string header = "{", body;
  const char* name_of_dt = dt == DType::F32 ? "F32" : dt == DType::F16 ? "F16" : "BF16";
  for (const auto& [name, t] : ts) {
    const size_t begin = body.size();
    for (float v : t.second) {
      if (dt == DType::F32) {
        body.append(reinterpret_cast<const char*>(&v), 4);
      } else {
        const uint16_t b = dt == DType::F16 ? float_to_half(v) : float_to_bf16(v);
        body.append(reinterpret_cast<const char*>(&b), 2);
      }
    }
    if (header.size() > 1) header += ",";
    header += "\"" + name + "\":{\"dtype\":\"" + name_of_dt + "\",\"shape\":[";
    for (size_t i = 0; i < t.first.size(); ++i) header += (i ? "," : "") + std::to_string(t.first[i]);
    header += "],\"data_offsets\":[" + std::to_string(begin) + "," + std::to_string(body.size()) + "]}";
  }
  write_safetensors_raw(p, header + "}", body);
}

// The HF name of a stacked expert param's pieces and the pieces themselves.
inline void add_hf_experts(std::map<std::string, std::pair<Shape, std::vector<float>>>& ts, const Family& f,
                           const std::string& param, const Shape& s, const std::vector<float>& v,
                           ExpertLayout layout, const Weights& w) {
  const std::string layer = "model.layers." + param.substr(4, param.find('.', 4) - 4) + ".";
  const bool gate = param.find("ffn_gate_exps") != std::string::npos, up = param.find("ffn_up_exps") != std::string::npos;
  const int64_t E = s[0], rows = s[1], cols = s[2];
  if (layout == ExpertLayout::Stacked) {
    if (up) return;  // written with the gate's
    if (!gate) {
      ts[layer + "mlp.experts.down_proj"] = {s, v};
      return;
    }
    const std::vector<float>& u = w.at(param.substr(0, param.find("ffn_gate_exps")) + "ffn_up_exps.weight");
    std::vector<float> gu;
    for (int64_t e = 0; e < E; ++e) {
      gu.insert(gu.end(), v.begin() + e * rows * cols, v.begin() + (e + 1) * rows * cols);
      gu.insert(gu.end(), u.begin() + e * rows * cols, u.begin() + (e + 1) * rows * cols);
    }
    ts[layer + "mlp.experts.gate_up_proj"] = {{E, 2 * rows, cols}, gu};
    return;
  }
  for (int64_t e = 0; e < E; ++e) {
    const std::vector<float> one(v.begin() + e * rows * cols, v.begin() + (e + 1) * rows * cols);
    const std::string n = f.model_type == "mixtral"
                              ? layer + "block_sparse_moe.experts." + std::to_string(e) + "." +
                                    (gate ? "w1" : up ? "w3" : "w2") + ".weight"
                              : layer + "mlp.experts." + std::to_string(e) + "." +
                                    (gate ? "gate_proj" : up ? "up_proj" : "down_proj") + ".weight";
    ts[n] = {{rows, cols}, one};
  }
}

inline void write_moe_hf_dir(const fs::path& dir, const Family& f, const Weights& w,
                             ExpertLayout layout = ExpertLayout::PerExpert, DType stored = DType::F32) {
  const LlamaConfig& c = f.cfg;
  Graph g = build_llama_graph(c, 1, 1, DType::F32);
  std::map<std::string, std::pair<Shape, std::vector<float>>> ts;
  for (const auto& [name, v] : w) {
    const Shape s = param_shape(g, name);
    if (is_expert_param(name)) {
      add_hf_experts(ts, f, name, s, v, layout, w);
      continue;
    }
    std::string hf = llama_hf_name(name, c.family);
    // transformers 5 names Mixtral's router as Qwen3-MoE's (mlp.gate).
    const std::string mixtral_router = "block_sparse_moe.gate.weight";
    if (layout == ExpertLayout::Stacked && hf.size() > mixtral_router.size() &&
        hf.compare(hf.size() - mixtral_router.size(), mixtral_router.size(), mixtral_router) == 0)
      hf = hf.substr(0, hf.size() - mixtral_router.size()) + "mlp.gate.weight";
    ts[hf] = {s, v};
  }
  write_safetensors_as(dir / "model.safetensors", ts, stored);
  write_text(dir / "config.json",
             "{\"model_type\": \"" + f.model_type + "\", \"vocab_size\": " + std::to_string(c.vocab_size) +
                 ", \"hidden_size\": " + std::to_string(c.hidden_size) +
                 ", \"intermediate_size\": " + std::to_string(c.intermediate_size) +
                 ", \"num_hidden_layers\": " + std::to_string(c.num_layers) +
                 ", \"num_attention_heads\": " + std::to_string(c.num_heads) +
                 ", \"num_key_value_heads\": " + std::to_string(c.num_kv_heads) +
                 ", \"head_dim\": " + std::to_string(c.head_dim) +
                 ", \"rope_theta\": " + std::to_string(c.rope_theta) + ", \"rms_norm_eps\": 1e-5" +
                 ", \"max_position_embeddings\": 64, \"tie_word_embeddings\": " +
                 (c.tie_embeddings ? "true" : "false") + f.extra_json + "}");
}

// GGUF architecture qwen3moe (or llama for Mixtral, Q/K rows permuted), the
// expert keys as llama.cpp's converter writes them.
// ffn_length false: no feed_forward_length key (every layer sparse).
inline void write_moe_gguf(const fs::path& path, const Family& f, const Weights& w, bool ffn_length = true) {
  const LlamaConfig& c = f.cfg;
  const bool mixtral = f.model_type == "mixtral";
  const std::string arch = mixtral ? "llama" : "qwen3moe", a = arch + ".";
  GgufWriter gw;
  gw.str("general.architecture", arch)
      .u32(a + "context_length", 64)
      .u32(a + "embedding_length", uint32_t(c.hidden_size))
      .u32(a + "block_count", uint32_t(c.num_layers))
      .u32(a + "attention.head_count", uint32_t(c.num_heads))
      .u32(a + "attention.head_count_kv", uint32_t(c.num_kv_heads))
      .u32(a + "attention.key_length", uint32_t(c.head_dim))
      .u32(a + "attention.value_length", uint32_t(c.head_dim))
      .f32(a + "attention.layer_norm_rms_epsilon", c.rms_eps)
      .f32(a + "rope.freq_base", c.rope_theta)
      .u32(a + "expert_count", uint32_t(c.num_experts))
      .u32(a + "expert_used_count", uint32_t(c.experts_per_token));
  if (!mixtral) gw.u32(a + "expert_feed_forward_length", uint32_t(c.expert_ffn));
  if (ffn_length) gw.u32(a + "feed_forward_length", uint32_t(c.intermediate_size));
  Graph g = build_llama_graph(c, 1, 1, DType::F32);
  for (const auto& [name, v] : w) {
    const Shape s = param_shape(g, name);
    const bool q = name.find("attn_q.weight") != std::string::npos, k = name.find("attn_k.weight") != std::string::npos;
    if (mixtral && (q || k)) gw.tensor(name, s, to_gguf_rows(v, q ? c.num_heads : c.num_kv_heads, c.head_dim, s[1]));
    else gw.tensor(name, s, v);
  }
  gw.write(path);
}

}  // namespace rlx::test
