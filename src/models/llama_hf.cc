#include "models/llama_hf.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <nlohmann/json.hpp>

#include "models/llama_shard.h"
#include "models/moe.h"
#include "rlx/error.h"

namespace rlx {

std::string llama_hf_name(const std::string& p, const std::string& family) {
  if (p == "token_embd.weight") return "model.embed_tokens.weight";
  if (p == "output_norm.weight") return "model.norm.weight";
  if (p == "output.weight") return "lm_head.weight";
  static const std::map<std::string, std::string> layer = {
      {"attn_norm.weight", "input_layernorm.weight"},  {"ffn_norm.weight", "post_attention_layernorm.weight"},
      {"attn_q.weight", "self_attn.q_proj.weight"},    {"attn_k.weight", "self_attn.k_proj.weight"},
      {"attn_v.weight", "self_attn.v_proj.weight"},    {"attn_output.weight", "self_attn.o_proj.weight"},
      {"ffn_gate.weight", "mlp.gate_proj.weight"},     {"ffn_up.weight", "mlp.up_proj.weight"},
      {"ffn_down.weight", "mlp.down_proj.weight"},     {"attn_q.bias", "self_attn.q_proj.bias"},
      {"attn_k.bias", "self_attn.k_proj.bias"},        {"attn_v.bias", "self_attn.v_proj.bias"},
      {"attn_q_norm.weight", "self_attn.q_norm.weight"}, {"attn_k_norm.weight", "self_attn.k_norm.weight"},
      {"attn_qkv.weight", "self_attn.qkv_proj.weight"}};
  static const std::map<std::string, std::string> phi3_layer = {{"ffn_up.weight", "mlp.gate_up_proj.weight"}};
  static const std::map<std::string, std::string> gemma_layer = {
      {"ffn_norm.weight", "pre_feedforward_layernorm.weight"},
      {"post_attention_norm.weight", "post_attention_layernorm.weight"},
      {"post_ffw_norm.weight", "post_feedforward_layernorm.weight"}};
  if (p.rfind("blk.", 0) == 0) {
    size_t dot = p.find('.', 4);
    auto it = dot == std::string::npos ? layer.end() : layer.find(p.substr(dot + 1));
    if (family == "phi3" && dot != std::string::npos && phi3_layer.count(p.substr(dot + 1))) {
      it = phi3_layer.find(p.substr(dot + 1));
    }
    const bool gemma = family == "gemma2" || family == "gemma3";
    if (gemma && dot != std::string::npos && gemma_layer.count(p.substr(dot + 1))) it = gemma_layer.find(p.substr(dot + 1));
    if (it != layer.end()) return "model.layers." + p.substr(4, dot - 4) + "." + it->second;
    if (dot != std::string::npos && p.substr(dot + 1) == "ffn_gate_inp.weight")
      return "model.layers." + p.substr(4, dot - 4) + "." + hf_router_name(family);
  }
  RLX_FAIL("llama: no Hugging Face name for param '" << p << "'");
}

LlamaSafetensors::LlamaSafetensors(const std::string& dir) : dir_(dir), cfg_(load_llama_config(dir)) {
  namespace fs = std::filesystem;
  const fs::path index = fs::path(dir) / "model.safetensors.index.json";
  if (fs::exists(index)) {
    std::ifstream in(index);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
      RLX_FAIL("llama: '" << index.string() << "' is not valid JSON: " << e.what());
    }
    RLX_CHECK(j.contains("weight_map") && j["weight_map"].is_object(),
              "llama: '" << index.string() << "' has no weight_map object");
    std::map<std::string, size_t> shard_index;
    for (auto& [tensor, file] : j["weight_map"].items()) {
      RLX_CHECK(file.is_string(), "llama: '" << index.string() << "': weight_map['" << tensor << "'] is not a file name");
      const std::string f = file.get<std::string>();
      RLX_CHECK(f.find('/') == std::string::npos && f.find("..") == std::string::npos,
                "llama: '" << index.string() << "': shard '" << f << "' is not a file in the directory");
      auto it = shard_index.find(f);
      if (it == shard_index.end()) {
        it = shard_index.emplace(f, shards_.size()).first;
        shards_.push_back(std::make_unique<SafetensorsFile>((fs::path(dir) / f).string()));
      }
      RLX_CHECK(shards_[it->second]->has(tensor),
                "llama: '" << index.string() << "' puts '" << tensor << "' in '" << f << "', which lacks it");
      shard_of_[tensor] = it->second;
    }
  } else {
    shards_.push_back(std::make_unique<SafetensorsFile>((fs::path(dir) / "model.safetensors").string()));
    for (const auto& n : shards_[0]->names()) shard_of_[n] = 0;
  }
  // Gemma3ForConditionalGeneration keeps the decoder under language_model
  // (transformers 4.50-4.51: language_model.model.*, later model.language_model.*).
  // A base model saved on its own (sentence-transformers' Transformer
  // module saves Qwen3Model: Qwen3-Embedding) has no prefix at all.
  if (!shard_of_.count("model.embed_tokens.weight"))
    for (const char* prefix : {"language_model.model.", "model.language_model.", ""})
      if (shard_of_.count(std::string(prefix) + "embed_tokens.weight")) {
        model_prefix_ = prefix;
        break;
      }
}

std::string LlamaSafetensors::name_of(const std::string& param) const {
  std::string n = llama_hf_name(param, cfg_.family);
  n = n.rfind("model.", 0) == 0 ? model_prefix_ + n.substr(6) : n;
  // A Mixtral router saved under transformers 5's name.
  const std::string mixtral_router = "block_sparse_moe.gate.weight";
  if (!shard_of_.count(n) && n.size() > mixtral_router.size() &&
      n.compare(n.size() - mixtral_router.size(), mixtral_router.size(), mixtral_router) == 0)
    return n.substr(0, n.size() - mixtral_router.size()) + hf_router_name("qwen3_moe");
  return n;
}

const SafetensorsFile& LlamaSafetensors::file_of(const std::string& name) const {
  auto it = shard_of_.find(name);
  RLX_CHECK(it != shard_of_.end(), "llama: '" << dir_ << "' has no tensor '" << name << "'");
  return *shards_[it->second];
}

std::vector<float> LlamaSafetensors::head_rows(const std::vector<int32_t>& tokens) const {
  const std::string name = name_of(cfg_.tie_embeddings ? "token_embd.weight" : "output.weight");
  RLX_CHECK(shard_of_.count(name), "llama: '" << dir_ << "' has no tensor '" << name << "' (the LM head"
                                              << (cfg_.tie_embeddings ? ", tied to the token embedding" : "")
                                              << ")");
  const SafetensorsFile& f = file_of(name);
  const SafetensorInfo& info = f.info(name);
  const Shape want{cfg_.vocab_size, cfg_.hidden_size};
  RLX_CHECK(info.shape == want, "llama: '" << f.path() << "', tensor '" << name << "' has shape "
                                           << shape_str(info.shape) << ", the config needs " << shape_str(want));
  const size_t H = size_t(cfg_.hidden_size), es = dtype_size(info.dtype);
  const std::span<const uint8_t> b = f.bytes(name);
  std::vector<float> out(tokens.size() * H);
  for (size_t r = 0; r < tokens.size(); ++r) {
    RLX_CHECK(tokens[r] >= 0 && tokens[r] < cfg_.vocab_size,
              "llama: '" << f.path() << "': token " << tokens[r] << " is outside the LM head '" << name << "' ("
                         << cfg_.vocab_size << " rows)");
    const uint8_t* row = b.data() + size_t(tokens[r]) * H * es;
    for (size_t k = 0; k < H; ++k) {
      if (info.dtype == DType::F32) {
        std::memcpy(&out[r * H + k], row + 4 * k, 4);
      } else {
        uint16_t h;
        std::memcpy(&h, row + 2 * k, 2);
        out[r * H + k] = info.dtype == DType::F16 ? half_to_float(h) : bf16_to_float(h);
      }
    }
  }
  return out;
}

void LlamaSafetensors::validate(const Graph& g, TpRank tp) const {
  const std::vector<LlamaParamSource> sources = llama_whole_sources(g, cfg_, tp);
  // A tensor the graph does not read means the config and the weights
  // disagree (layers past num_hidden_layers, another architecture's weights).
  // Two are known to be harmless: the rotary inverse frequencies some
  // checkpoints store, and an LM head the graph does not read.
  std::set<std::string> used;
  for (const LlamaParamSource& s : sources) {
    if (!is_expert_param(s.tensor)) {
      used.insert(name_of(s.tensor));
      continue;
    }
    for (const std::string& t : expert_rows(s).tensors) used.insert(t);
  }
  auto ends_with = [](const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
  };
  // A multimodal checkpoint's other towers (vision, projector) sit beside
  // its language model, which is all a text decoder reads.
  auto other_tower = [&](const std::string& name) {
    return !model_prefix_.empty() && name.rfind(model_prefix_, 0) != 0 && !ends_with(name, "lm_head.weight");
  };
  // An LM head the graph does not read is one beside tied embeddings, or
  // one a graph without a head (an embedder's) leaves aside.
  for (const auto& [name, shard] : shard_of_)
    RLX_CHECK(used.count(name) || ends_with(name, "rotary_emb.inv_freq") || other_tower(name) ||
                  ends_with(name, "lm_head.weight"),
              "llama: '" << shards_[shard]->path() << "': tensor '" << name << "' is not used by the "
                         << cfg_.family << " config (" << cfg_.num_layers
                         << " layers; unknown or extra weights)");
  for (const LlamaParamSource& s : sources) {
    if (is_expert_param(s.tensor)) {
      validate_experts(s);
      continue;
    }
    const std::string name = name_of(s.tensor);
    const SafetensorsFile& f = file_of(name);
    RLX_CHECK(f.info(name).shape == s.shape, "llama: '" << f.path() << "', tensor '" << name << "' has shape "
                                                        << shape_str(f.info(name).shape) << ", the config needs "
                                                        << shape_str(s.shape));
  }
}

void LlamaSafetensors::load_into(Executable& exe, const Graph& g, TpRank tp) const {
  const ParamSink sink = llama_param_sink(exe, cfg_, tp);
  for (const LlamaParamSource& s : llama_whole_sources(g, cfg_, tp)) {
    if (is_expert_param(s.tensor)) {
      load_experts(sink, s);
      continue;
    }
    const std::string name = name_of(s.tensor);
    const SafetensorsFile& f = file_of(name);
    // Gemma's norms compute x * (1 + w): the 1 joins the gain here, once.
    const bool adds_one = cfg_.norm_adds_one && s.tensor.size() >= 11 &&
                          s.tensor.compare(s.tensor.size() - 11, 11, "norm.weight") == 0;
    if (adds_one) {
      std::vector<float> v = f.to_f32(name);
      for (float& x : v) x += 1.f;
      sink.set_f32(s.param, v.data(), v.size(), s.shape);
      continue;
    }
    if (!s.quant) {  // from the mapped file as stored, or converted in one pass
      const std::span<const uint8_t> b = f.bytes(name);
      sink.set_bytes(s.param, f.info(name).dtype, b.data(), b.size(), s.shape);
      continue;
    }
    set_quantized_weight(sink, s, f.to_f32(name));
  }
}

ExpertRows LlamaSafetensors::expert_rows(const LlamaParamSource& s) const {
  const size_t dot = s.tensor.find('.', 4);
  const std::string layer = model_prefix_ + "layers." + s.tensor.substr(4, dot - 4) + ".";
  return hf_expert_rows(s.tensor, layer, cfg_.family, s.shape[0], s.shape[1],
                        [&](const std::string& n) { return shard_of_.count(n) != 0; });
}

// Each expert's [rows, cols] in the checkpoint: one tensor per expert, or
// a block of a stacked tensor holding at least row0 + rows rows per expert.
void LlamaSafetensors::validate_experts(const LlamaParamSource& s) const {
  const ExpertRows r = expert_rows(s);
  const int64_t E = s.shape[0], rows = s.shape[1], cols = s.shape[2];
  for (const std::string& t : r.tensors) {
    const SafetensorsFile& f = file_of(t);
    const Shape& got = f.info(t).shape;
    const bool ok = r.stacked ? got.size() == 3 && got[0] == E && got[1] >= r.row0 + rows && got[2] == cols
                              : got == Shape{rows, cols};
    RLX_CHECK(ok, "llama: '" << f.path() << "', tensor '" << t << "' has shape " << shape_str(got)
                             << "; the config's experts (" << E << " of " << shape_str(Shape{rows, cols})
                             << ") do not fit it");
    RLX_CHECK(f.info(t).dtype == file_of(r.tensors[0]).info(r.tensors[0]).dtype,
              "llama: '" << f.path() << "': the experts of '" << s.tensor << "' mix dtypes");
  }
}

// The experts copied into one [E, rows, cols] param as stored (no conversion).
void LlamaSafetensors::load_experts(const ParamSink& sink, const LlamaParamSource& s) const {
  const ExpertRows r = expert_rows(s);
  const int64_t E = s.shape[0], rows = s.shape[1], cols = s.shape[2];
  const DType dt = file_of(r.tensors[0]).info(r.tensors[0]).dtype;
  const size_t block = size_t(rows * cols) * dtype_size(dt);
  std::vector<uint8_t> all(size_t(E) * block);
  for (int64_t e = 0; e < E; ++e) {
    const std::string& t = r.tensors[r.stacked ? 0 : size_t(e)];
    const std::span<const uint8_t> b = file_of(t).bytes(t);
    size_t from = 0;
    if (r.stacked) {
      const int64_t per_expert = file_of(t).info(t).shape[1];
      from = size_t((e * per_expert + r.row0) * cols) * dtype_size(dt);
    }
    RLX_CHECK(from + block <= b.size(), "llama: tensor '" << t << "' is shorter than its shape");
    std::memcpy(all.data() + size_t(e) * block, b.data() + from, block);
  }
  if (s.quant) {  // --quantize on the CPU: the stack quantized row by row
    std::vector<float> v(size_t(E * rows * cols));
    for (size_t i = 0; i < v.size(); ++i) v[i] = load_as_float(all.data(), dt, i);
    set_quantized_weight(sink, s, v);
    return;
  }
  sink.set_bytes(s.param, dt, all.data(), all.size(), s.shape);
}

}  // namespace rlx
