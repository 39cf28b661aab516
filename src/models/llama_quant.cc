#include "models/llama_quant.h"

#include <cstring>
#include <functional>
#include <map>

#include "backends/cpu/cpu_quant_dot.h"
#include "models/llama.h"
#include "models/moe.h"
#include "thunks/quant_math.h"

namespace rlx {
namespace {

const char* const kQuants = ".quants";
const char* const kScales = ".scales";

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// Rows of W [..., k]: every dim but the last (an expert stack [E, n, k]
// is E * n rows).
int64_t rows_of(const Shape& s) { return numel(s) / s.back(); }

// Splits W's quants and scales into their two params, W's leading dims kept.
void set_split(const ParamSink& sink, const LlamaParamSource& s, std::vector<uint8_t> quants, std::vector<uint8_t> scales) {
  const int64_t k = s.shape.back();
  Shape qs = s.shape, ss = s.shape;
  qs.back() = k / quant_elems_per_word(*s.quant);
  ss.back() = k / kQuantBlock * quant_scales_per_block(*s.quant);
  sink.set(s.tensor + kQuants, HostTensor{DType::I32, qs, std::move(quants)});
  sink.set(s.tensor + kScales, HostTensor{DType::F16, ss, std::move(scales)});
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
    if (c.is_moe_layer(l)) {  // its experts [E, n, k] (moe.h) instead of a dense FFN
      const int64_t E = c.num_experts, EF = c.expert_ffn;
      w.push_back({p + "ffn_gate_exps.weight", {E, EF, H}});
      w.push_back({p + "ffn_up_exps.weight", {E, EF, H}});
      w.push_back({p + "ffn_down_exps.weight", {E, H, EF}});
      continue;
    }
    w.push_back({p + "ffn_gate.weight", {F, H}});
    w.push_back({p + "ffn_up.weight", {F, H}});
    w.push_back({p + "ffn_down.weight", {H, F}});
  }
  w.push_back({c.tie_embeddings ? "token_embd.weight" : "output.weight", {c.vocab_size, H}});
  return w;
}

QuantizedWeights plan_llama_quantization(const LlamaConfig& c,
                                         const std::function<std::optional<QuantType>(const std::string&)>& stored,
                                         std::optional<QuantType> quantize, Device device) {
  RLX_CHECK(!quantize || quant_type_runs_on(*quantize, device),
            "llama: quantize " << quant_type_name(*quantize) << " has no kernels on this device");
  QuantizedWeights q;
  for (const auto& [name, shape] : llama_matmul_weights(c)) {
    // Quantized experts have kernels of their own (moe_matmul_q), held to
    // the CPU's on the GPU by the op cases only so far: the GPU keeps floats.
    if (is_expert_param(name) && device != Device::Cpu) continue;
    std::optional<QuantType> t = stored ? stored(name) : std::nullopt;
    if (t && !quant_type_runs_on(*t, device)) t.reset();
    // The f32 kernel reads Q4_1 blocks slower than the expanded f32 weights
    // are read: a stored Q4_1 stays quantized only for the integer kernels.
    if (t && *t == QuantType::Q4_1 && device == Device::Cpu && cpu::quant_kernel() == cpu::QuantKernel::F32)
      t.reset();
    if (!t) t = quantize;
    if (!t) continue;
    // An expert stack whose rows are no whole blocks (Mixtral-like test
    // shapes, FFN 37) keeps floats rather than refusing the whole model.
    if (is_expert_param(name) && shape.back() % kQuantBlock != 0) continue;
    RLX_CHECK(shape.back() % kQuantBlock == 0, "llama: tensor '" << name << "' has rows of " << shape.back()
                                                             << " elements; " << quant_type_name(*t)
                                                             << " needs a multiple of " << kQuantBlock);
    q[name] = *t;
  }
  return q;
}

bool quant_type_runs_on(QuantType t, Device device) {
  return device == Device::Cpu || t == QuantType::Q8_0 || t == QuantType::Q4_0 || t == QuantType::FP8;
}

namespace {

// The format of each quants param the graph reads through a quantized op
// (matmul_q, moe_matmul_q, gather_q), walking back from the op through
// the ops between (a concat of Q|K|V's quants) to the params. The shapes
// alone cannot tell FP8 from Q8_0 (the same bytes per block).
std::map<std::string, QuantType> quant_types_read(const Graph& g) {
  std::map<std::string, QuantType> types;
  std::function<void(ValueId, QuantType)> mark = [&](ValueId v, QuantType t) {
    const int32_t producer = g.value(v).producer;
    if (producer < 0) return;
    const Node& n = g.nodes()[size_t(producer)];
    if (n.op == OpKind::Param) {
      types.emplace(n.name, t);
      return;
    }
    for (ValueId in : n.inputs) mark(in, t);
  };
  for (const Node& n : g.nodes()) {
    if (n.dead) continue;
    if (n.op == OpKind::MatMulQ || n.op == OpKind::MoeMatMulQ) mark(n.inputs[1], std::get<MatMulQAttrs>(n.attrs).type);
    else if (n.op == OpKind::GatherQ) mark(n.inputs[0], std::get<GatherQAttrs>(n.attrs).type);
  }
  return types;
}

}  // namespace

std::vector<LlamaParamSource> llama_param_sources(const Graph& g) {
  const std::map<std::string, QuantType> read_as = quant_types_read(g);
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
    RLX_CHECK(sc != shapes.end() && (shape.size() == 2 || shape.size() == 3) &&
                  sc->second.size() == shape.size() && shape.back() > 0,
              "llama: param '" << name << "' comes without its scales");
    // Words of quants per f16 of scales: Q8_0 8, Q4_0 4, Q4_1 2.
    const int64_t words = shape.back(), halves = sc->second.back();
    std::optional<QuantType> t;
    for (QuantType c : {QuantType::Q8_0, QuantType::Q4_0, QuantType::Q4_1})
      if (halves % quant_scales_per_block(c) == 0 &&
          halves / quant_scales_per_block(c) * kQuantBlock == words * quant_elems_per_word(c))
        t = c;
    RLX_CHECK(t, "llama: params '" << name << "' " << shape_str(shape) << " and '" << w << kScales << "' "
                                   << shape_str(sc->second) << " are no quantized weight");
    // FP8 shares Q8_0's shapes: the op reading the weight says which.
    const auto read = read_as.find(name);
    if (read != read_as.end() && *t == QuantType::Q8_0 && read->second == QuantType::FP8) t = QuantType::FP8;
    Shape ws = shape;
    ws.back() = words * quant_elems_per_word(*t);
    out.push_back({name, w, ws, t});
  }
  return out;
}

void set_quantized_weight(const ParamSink& sink, const LlamaParamSource& s, const std::vector<float>& w) {
  const int64_t n = rows_of(s.shape), k = s.shape.back(), row_bytes = k / kQuantBlock * quant_block_bytes(*s.quant);
  RLX_CHECK(int64_t(w.size()) == n * k, "llama: tensor '" << s.tensor << "' has " << w.size() << " values, not "
                                                          << n * k);
  const int64_t row_scales = k / kQuantBlock * quant_scales_per_block(*s.quant);
  std::vector<uint8_t> quants(size_t(n * row_bytes)), scales(size_t(n * row_scales) * 2);
  for (int64_t r = 0; r < n; ++r)
    quantize_row(*s.quant, w.data() + r * k, k, quants.data() + r * row_bytes,
                 reinterpret_cast<uint16_t*>(scales.data()) + r * row_scales);
  set_split(sink, s, std::move(quants), std::move(scales));
}

void set_quantized_weight_blocks(const ParamSink& sink, const LlamaParamSource& s, std::span<const uint8_t> blocks) {
  const int64_t n = rows_of(s.shape), k = s.shape.back(), count = n * (k / kQuantBlock);
  const size_t qb = size_t(quant_block_bytes(*s.quant)), sb = size_t(2 * quant_scales_per_block(*s.quant));
  RLX_CHECK(blocks.size() == size_t(count) * (sb + qb),
            "llama: tensor '" << s.tensor << "' has " << blocks.size() << " bytes, not " << count << " "
                              << quant_type_name(*s.quant) << " blocks");
  std::vector<uint8_t> quants(size_t(count) * qb), scales(size_t(count) * sb);
  for (int64_t b = 0; b < count; ++b) {
    const uint8_t* src = blocks.data() + size_t(b) * (sb + qb);
    std::memcpy(scales.data() + size_t(b) * sb, src, sb);
    std::memcpy(quants.data() + size_t(b) * qb, src + sb, qb);
  }
  set_split(sink, s, std::move(quants), std::move(scales));
}

}  // namespace rlx
