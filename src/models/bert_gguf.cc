#include "models/bert_gguf.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "models/gguf.h"
#include "models/gguf_held_quant.h"
#include "models/llama_quant.h"
#include "models/nomic_bert.h"
#include "rlx/error.h"

namespace rlx {
namespace {

// llama.cpp's names for BERT's tensors, beside the Hugging Face names of
// encoder_names(EncoderFamily::Bert).
EncoderNames gguf_names() {
  EncoderNames n;
  n.word = "token_embd";
  n.position = "position_embd";
  n.type = "token_types";
  n.embed_norm = "token_embd_norm";
  n.layer = "blk.";
  n.query = "attn_q";
  n.key = "attn_k";
  n.value = "attn_v";
  n.attn_out = "attn_output";
  n.attn_norm = "attn_output_norm";
  n.ffn_in = "ffn_up";
  n.ffn_out = "ffn_down";
  n.out_norm = "layer_output_norm";
  return n;
}

bool starts_with(const std::string& s, const std::string& head) { return s.rfind(head, 0) == 0; }

}  // namespace

bool is_gguf_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, 4) && std::memcmp(magic, "GGUF", 4) == 0;
}

std::string bert_gguf_tensor(EncoderFamily family, const std::string& param) {
  using Names = std::vector<std::pair<std::string, std::string>>;  // Hugging Face -> GGUF
  const EncoderNames hf = encoder_names(EncoderFamily::Bert), gg = gguf_names();
  std::string layers = hf.layer;
  Names top, layer;
  if (family == EncoderFamily::NomicBert) {
    // nomic's checkpoint names (nomic_bert_tensors).
    layers = encoder_names(EncoderFamily::NomicBert).layer;
    top = {{hf.word, gg.word}, {hf.type, gg.type}, {"emb_ln", gg.embed_norm}};
    layer = {{"attn.Wqkv", "attn_qkv"}, {"attn.out_proj", gg.attn_out}, {"mlp.fc11", "ffn_up"},
             {"mlp.fc12", "ffn_gate"},  {"mlp.fc2", gg.ffn_out},        {"norm1", gg.attn_norm},
             {"norm2", gg.out_norm}};
  } else if (family == EncoderFamily::Bert) {
    top = {{hf.word, gg.word}, {hf.position, gg.position}, {hf.type, gg.type}, {hf.embed_norm, gg.embed_norm}};
    layer = {{hf.query, gg.query},         {hf.key, gg.key},       {hf.value, gg.value},
             {hf.attn_out, gg.attn_out},   {hf.attn_norm, gg.attn_norm}, {hf.ffn_in, gg.ffn_in},
             {hf.ffn_out, gg.ffn_out},     {hf.out_norm, gg.out_norm}};
  }
  // "<name>.weight" or "<name>.bias" -> the GGUF name with the same suffix.
  auto swap = [&](const std::string& rest, const Names& names) -> std::string {
    for (const auto& [from, to] : names) {
      if (!starts_with(rest, from + ".")) continue;
      const std::string suffix = rest.substr(from.size());
      if (suffix == ".weight" || suffix == ".bias") return to + suffix;
    }
    return "";
  };
  if (std::string s = swap(param, top); !s.empty()) return s;
  if (!starts_with(param, layers)) return "";
  const size_t dot = param.find('.', layers.size());
  if (dot == std::string::npos) return "";
  const std::string index = param.substr(layers.size(), dot - layers.size());
  if (index.empty() || index.size() > 9 || index.find_first_not_of("0123456789") != std::string::npos) return "";
  const std::string s = swap(param.substr(dot + 1), layer);
  return s.empty() ? "" : gg.layer + index + "." + s;
}

BertConfig bert_config_from_gguf(const GgufFile& f) {
  const std::string where = "bert: '" + f.path() + "'";
  const std::string arch = f.get_string("general.architecture");
  RLX_CHECK(arch == "bert" || arch == "nomic-bert",
            where << ": general.architecture '" << arch
                  << "' is not an encoder rlx reads from GGUF (\"bert\" and \"nomic-bert\" are; a decoder's GGUF is "
                     "for generate)");
  const BertLimits L;
  const std::string k = arch + ".";
  BertConfig c;
  c.num_hidden_layers = int(f.get_int(k + "block_count", 1, L.layers));
  c.hidden_size = int(f.get_int(k + "embedding_length", 1, L.hidden));
  c.intermediate_size = int(f.get_int(k + "feed_forward_length", 1, L.intermediate));
  c.num_attention_heads = int(f.get_int(k + "attention.head_count", 1, L.heads));
  c.max_position_embeddings = int(f.get_int(k + "context_length", 1, L.positions));
  c.layer_norm_eps = float(f.get_float(k + "attention.layer_norm_epsilon", 1e-30, 1.0));
  RLX_CHECK(!f.get_bool(k + "attention.causal", false),
            where << ": " << k << "attention.causal is true (an encoder attends both ways)");
  RLX_CHECK(c.hidden_size % c.num_attention_heads == 0,
            where << ": " << k << "embedding_length " << c.hidden_size << " is not a multiple of " << k
                  << "attention.head_count " << c.num_attention_heads);
  if (arch == "bert") {
    c.family = EncoderFamily::Bert;
    c.model_type = "bert";
    c.architectures = {"BertModel"};
    // The converter writes no activation: BERT's is GELU (erf), as transformers runs it.
    c.hidden_act = Activation::Gelu;
  } else {
    // nomic-embed-text as the converter takes it: rotary positions over the
    // whole head (halves rotated), a SwiGLU MLP, biases where the file has them.
    c.family = EncoderFamily::NomicBert;
    c.model_type = "nomic_bert";
    c.architectures = {"NomicBertModel"};
    c.nomic.rotary_base = float(f.get_float_or(k + "rope.freq_base", 10000.0, 1e-3, 1e12));
    c.nomic.rotary_interleaved = false;
    c.nomic.qkv_bias = f.has_tensor("blk.0.attn_qkv.bias");
    c.nomic.fc1_bias = f.has_tensor("blk.0.ffn_up.bias");
    c.nomic.fc2_bias = f.has_tensor("blk.0.ffn_down.bias");
    c.nomic.gate_act = c.hidden_act = Activation::Silu;
    RLX_CHECK(c.head_dim() % 2 == 0, where << ": " << k << "embedding_length " << c.hidden_size << " over "
                                           << k << "attention.head_count " << c.num_attention_heads
                                           << " must give an even head size for rotary positions");
  }
  RLX_CHECK(!f.has_tensor("cls.weight") && !f.has_tensor("cls.output.weight"),
            where << ": tensor 'cls.weight' or 'cls.output.weight' (a classifier head: a reranker) is not supported; "
                     "rlx reads BERT embedders from GGUF");
  // The vocabulary and the token types are the tables' rows.
  auto rows = [&](const std::string& name, int64_t limit) {
    RLX_CHECK(f.has_tensor(name), where << " has no tensor '" << name << "'");
    const GgufTensorInfo& t = f.tensor(name);
    RLX_CHECK(t.shape.size() == 2 && t.shape[1] == c.hidden_size && t.shape[0] >= 1 && t.shape[0] <= limit,
              where << ", tensor '" << name << "' has shape " << shape_str(t.shape) << ", expected [rows, "
                    << c.hidden_size << "] with at most " << limit << " rows");
    return int(t.shape[0]);
  };
  c.vocab_size = rows("token_embd.weight", L.vocab);
  c.type_vocab_size = f.has_tensor("token_types.weight") ? rows("token_types.weight", L.type_vocab) : 0;
  c.pad_token_id = int(f.get_int_or("tokenizer.ggml.padding_token_id", 0, 0, c.vocab_size - 1));
  return c;
}

std::optional<Pooling> bert_pooling_from_gguf(const GgufFile& f) {
  const std::string key = f.get_string("general.architecture") + ".pooling_type";
  const int64_t p = f.get_int_or(key, 0, INT64_MIN, INT64_MAX);
  switch (p) {
    case 0: return std::nullopt;
    case 1: return Pooling::Mean;
    case 2: return Pooling::Cls;
    case 3: return Pooling::LastToken;
    default:
      RLX_FAIL("bert: '" << f.path() << "': " << key << " " << p
                         << (p == 4 ? " (rank: a reranker's classifier)" : "")
                         << " is not supported (1 mean, 2 cls and 3 last are)");
  }
}

BertGguf::BertGguf(const std::string& path)
    : file_(std::make_unique<GgufFile>(path)), cfg_(bert_config_from_gguf(*file_)) {}

BertGguf::~BertGguf() = default;

void BertGguf::expect(const std::string& tensor, const Shape& want) const {
  RLX_CHECK(file_->has_tensor(tensor),
            "bert: '" << file_->path() << "' has no tensor '" << tensor << "'"
                      << (starts_with(tensor, "blk.") && tensor.find(".attn_") != std::string::npos &&
                                  file_->has_tensor(tensor.substr(0, tensor.find(".attn_")) + ".attn_qkv.weight")
                              ? " (a fused attn_qkv is not supported: convert without --fuse-qkv)"
                              : ""));
  const GgufTensorInfo& t = file_->tensor(tensor);
  RLX_CHECK(t.shape == want, "bert: '" << file_->path() << "', tensor '" << tensor << "' has shape "
                                       << shape_str(t.shape) << ", the config needs " << shape_str(want));
  RLX_CHECK(ggml_type_dequantizable(t.type), "bert: '" << file_->path() << "', tensor '" << tensor << "': type "
                                                       << ggml_type_name(t.type) << " is not supported");
}

void BertGguf::check_sizes(const BertConfig& c) const {
  if (c.family == EncoderFamily::NomicBert) {
    for (const auto& [name, shape] : nomic_bert_tensors(c)) expect(bert_gguf_tensor(c.family, name), shape);
    return;
  }
  const int64_t H = c.hidden_size;
  expect("token_embd.weight", {c.vocab_size, H});
  expect("position_embd.weight", {c.max_position_embeddings, H});
  if (c.type_vocab_size > 0) expect("token_types.weight", {c.type_vocab_size, H});
  const std::string last = "blk." + std::to_string(c.num_hidden_layers - 1) + ".";
  expect(last + "ffn_up.weight", {c.intermediate_size, H});
  expect(last + "layer_output_norm.weight", {H});
}

void BertGguf::validate(const Graph& g) const {
  std::set<std::string> used;
  for (const LlamaParamSource& s : llama_param_sources(g)) {
    const std::string name = bert_gguf_tensor(cfg_.family, s.tensor);
    RLX_CHECK(!name.empty(), "bert: '" << file_->path() << "': the graph's param '" << s.param
                                       << "' has no GGUF tensor (not this encoder's graph)");
    expect(name, s.shape);
    RLX_CHECK(!s.quant || held_quant_type(file_->tensor(name).type) == s.quant,
              "bert: '" << file_->path() << "', tensor '" << name << "' is "
                        << ggml_type_name(file_->tensor(name).type) << ", the graph reads it as "
                        << quant_type_name(*s.quant));
    used.insert(name);
  }
  // Every tensor of the file is read, as llama.cpp requires: one left aside
  // means the metadata and the weights disagree.
  for (const GgufTensorInfo& t : file_->tensors())
    RLX_CHECK(used.count(t.name), "bert: '" << file_->path() << "': tensor '" << t.name
                                            << "' is not used by the " << cfg_.model_type
                                            << " config (unknown or extra weights)");
}

void BertGguf::load_into(Executable& exe, const Graph& g) const {
  for (const LlamaParamSource& s : llama_param_sources(g)) {
    const std::string name = bert_gguf_tensor(cfg_.family, s.tensor);
    if (s.quant) {
      load_held_quant(exe, s, *file_, name);
      continue;
    }
    const GgmlType type = file_->tensor(name).type;
    if (type == GgmlType::F32 || type == GgmlType::F16 || type == GgmlType::BF16) {
      // Float tensors go from the mapped file to the param as they are.
      const std::span<const uint8_t> b = file_->bytes(name);
      const DType dt = type == GgmlType::F32 ? DType::F32 : type == GgmlType::F16 ? DType::F16 : DType::BF16;
      exe.set_param_bytes(s.param, dt, b.data(), b.size());
      continue;
    }
    std::vector<float> v = file_->to_f32(name);
    exe.set_param_f32(s.param, v.data(), v.size());
  }
}

std::map<std::string, QuantType> BertGguf::held_weights() const {
  std::map<std::string, QuantType> held;
  if (cfg_.family == EncoderFamily::NomicBert || cfg_.family == EncoderFamily::ModernBert) return held;
  for (const std::string& w : encoder_dense_weights(cfg_)) {
    const std::string name = bert_gguf_tensor(cfg_.family, w);
    if (name.empty() || !file_->has_tensor(name)) continue;  // check_sizes / validate name what is missing
    const GgufTensorInfo& t = file_->tensor(name);
    if (const std::optional<QuantType> q = held_quant_type(t.type); q && t.shape.size() == 2 && t.shape[1] % kQuantBlock == 0)
      held[w] = *q;
  }
  return held;
}

}  // namespace rlx
