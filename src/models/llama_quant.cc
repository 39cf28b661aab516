#include "models/llama_quant.h"

#include <cstring>

#include "models/llama.h"
#include "thunks/quant_math.h"

namespace rlx {
namespace {

const char* const kQuants = ".quants";
const char* const kScales = ".scales";

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// Splits W's quants and scales into their two params.
void set_split(Executable& exe, const LlamaParamSource& s, std::vector<uint8_t> quants, std::vector<uint8_t> scales) {
  const int64_t n = s.shape[0], k = s.shape[1];
  exe.set_param(s.tensor + kQuants,
                HostTensor{DType::I32, {n, k / quant_elems_per_word(*s.quant)}, std::move(quants)});
  exe.set_param(s.tensor + kScales, HostTensor{DType::F16, {n, k / kQuantBlock}, std::move(scales)});
}

}  // namespace

std::vector<std::pair<std::string, Shape>> llama_matmul_weights(const LlamaConfig& c) {
  const int64_t H = c.hidden_size, F = c.intermediate_size;
  const int64_t q_dim = int64_t(c.num_heads) * c.head_dim, kv_dim = int64_t(c.num_kv_heads) * c.head_dim;
  std::vector<std::pair<std::string, Shape>> w;
  for (int l = 0; l < c.num_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    w.push_back({p + "attn_q.weight", {q_dim, H}});
    w.push_back({p + "attn_k.weight", {kv_dim, H}});
    w.push_back({p + "attn_v.weight", {kv_dim, H}});
    w.push_back({p + "attn_output.weight", {H, q_dim}});
    w.push_back({p + "ffn_gate.weight", {F, H}});
    w.push_back({p + "ffn_up.weight", {F, H}});
    w.push_back({p + "ffn_down.weight", {H, F}});
  }
  w.push_back({c.tie_embeddings ? "token_embd.weight" : "output.weight", {c.vocab_size, H}});
  return w;
}

QuantizedWeights plan_llama_quantization(const LlamaConfig& c,
                                         const std::function<std::optional<QuantType>(const std::string&)>& stored,
                                         std::optional<QuantType> quantize) {
  QuantizedWeights q;
  for (const auto& [name, shape] : llama_matmul_weights(c)) {
    std::optional<QuantType> t = stored ? stored(name) : std::nullopt;
    if (!t) t = quantize;
    if (!t) continue;
    RLX_CHECK(shape[1] % kQuantBlock == 0, "llama: tensor '" << name << "' has rows of " << shape[1]
                                                             << " elements; " << quant_type_name(*t)
                                                             << " needs a multiple of " << kQuantBlock);
    q[name] = *t;
  }
  return q;
}

std::vector<LlamaParamSource> llama_param_sources(const Graph& g) {
  std::map<std::string, Shape> shapes;
  for (const Node& n : g.nodes())
    if (n.op == OpKind::Param) shapes[n.name] = g.value(n.outputs[0]).shape;
  std::vector<LlamaParamSource> out;  // in graph order, so errors name the first param missing
  for (const Node& n : g.nodes()) {
    if (n.op != OpKind::Param) continue;
    const std::string& name = n.name;
    const Shape& shape = g.value(n.outputs[0]).shape;
    if (ends_with(name, kScales)) continue;
    if (!ends_with(name, kQuants)) {
      out.push_back({name, name, shape, std::nullopt});
      continue;
    }
    const std::string w = name.substr(0, name.size() - std::strlen(kQuants));
    auto sc = shapes.find(w + kScales);
    RLX_CHECK(sc != shapes.end() && shape.size() == 2 && sc->second.size() == 2 && shape[1] > 0,
              "llama: param '" << name << "' comes without its scales");
    const int64_t k = sc->second[1] * kQuantBlock, per_word = k / shape[1];
    RLX_CHECK(per_word * shape[1] == k && (per_word == 4 || per_word == 8),
              "llama: params '" << name << "' " << shape_str(shape) << " and '" << w << kScales << "' "
                                << shape_str(sc->second) << " are no quantized weight");
    out.push_back({name, w, {shape[0], k}, per_word == 8 ? QuantType::Q4_0 : QuantType::Q8_0});
  }
  return out;
}

void set_quantized_weight(Executable& exe, const LlamaParamSource& s, const std::vector<float>& w) {
  const int64_t n = s.shape[0], k = s.shape[1], row_bytes = k / kQuantBlock * quant_block_bytes(*s.quant);
  RLX_CHECK(int64_t(w.size()) == n * k, "llama: tensor '" << s.tensor << "' has " << w.size() << " values, not "
                                                          << n * k);
  std::vector<uint8_t> quants(size_t(n * row_bytes)), scales(size_t(n * (k / kQuantBlock)) * 2);
  for (int64_t r = 0; r < n; ++r)
    quantize_row(*s.quant, w.data() + r * k, k, quants.data() + r * row_bytes,
                 reinterpret_cast<uint16_t*>(scales.data()) + r * (k / kQuantBlock));
  set_split(exe, s, std::move(quants), std::move(scales));
}

void set_quantized_weight_blocks(Executable& exe, const LlamaParamSource& s, std::span<const uint8_t> blocks) {
  const int64_t n = s.shape[0], k = s.shape[1], count = n * (k / kQuantBlock);
  const size_t qb = size_t(quant_block_bytes(*s.quant));
  RLX_CHECK(blocks.size() == size_t(count) * (2 + qb),
            "llama: tensor '" << s.tensor << "' has " << blocks.size() << " bytes, not " << count << " "
                              << quant_type_name(*s.quant) << " blocks");
  std::vector<uint8_t> quants(size_t(count) * qb), scales(size_t(count) * 2);
  for (int64_t b = 0; b < count; ++b) {
    const uint8_t* src = blocks.data() + size_t(b) * (2 + qb);
    std::memcpy(scales.data() + b * 2, src, 2);
    std::memcpy(quants.data() + size_t(b) * qb, src + 2, qb);
  }
  set_split(exe, s, std::move(quants), std::move(scales));
}

}  // namespace rlx
