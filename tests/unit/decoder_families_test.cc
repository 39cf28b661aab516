// The decoder families (Llama 3 rope scaling, Qwen2, Qwen3, Mistral) from
// real files: a Hugging Face directory (config.json + model.safetensors) and
// a GGUF written as llama.cpp's converter lays it out, with random weights
// of odd sizes; logits after a prompt and after each cached decode step
// against the double-precision reference (tests/models/llama_reference.h).
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "models/gguf_writer.h"      // tests/models
#include "models/llama_generator.h"
#include "models/llama_hf.h"
#include "models/llama_reference.h"  // tests/models
#include "models/test_files.h"       // tests/models
#include "test_util.h"

namespace rlx {
namespace {

namespace fs = std::filesystem;

// transformers' _compute_llama3_parameters, written out again here (not
// rlx's llama3_rope_divisors) so that the HF mapping is checked: the
// divisor of pair i is inv_freq / inv_freq_llama.
std::vector<float> hf_llama3_divisors(int dims, double theta, double factor, double low, double high, double old_ctx) {
  std::vector<float> d;
  for (int i = 0; i < dims; i += 2) {
    const double inv = 1.0 / std::pow(theta, double(i) / dims), wavelen = 2 * std::numbers::pi / inv;
    double llama = wavelen > old_ctx / low ? inv / factor : inv;
    const double smooth = (old_ctx / wavelen - low) / (high - low);
    const bool medium = !(wavelen < old_ctx / high) && !(wavelen > old_ctx / low);
    if (medium) llama = (1 - smooth) * llama / factor + smooth * llama;
    d.push_back(float(inv / llama));
  }
  return d;
}

struct Family {
  std::string name, model_type;  // model_type doubles as the GGUF architecture
  LlamaConfig cfg;
  std::string extra_json;  // more config.json fields
};

Family llama3() {
  Family f{"llama3", "llama", test::odd_config(), R"(, "rope_scaling": {"rope_type": "llama3", "factor": 8.0,
    "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 16})"};
  f.cfg.rope_freq_divisors = hf_llama3_divisors(f.cfg.head_dim, f.cfg.rope_theta, 8, 1, 4, 16);
  return f;
}

Family qwen2() {
  Family f{"qwen2", "qwen2", test::odd_config(), R"(, "use_sliding_window": false, "sliding_window": 32)"};
  f.cfg.family = "qwen2";
  f.cfg.qkv_bias = true;
  f.cfg.tie_embeddings = false;
  f.cfg.rope_theta = 1e6f;
  return f;
}

// head_dim 40 with hidden 200 over 6 heads (not a multiple), GQA 6:3.
Family qwen3() {
  Family f{"qwen3", "qwen3", test::odd_config(), ""};
  f.cfg.family = "qwen3";
  f.cfg.qk_norm = true;
  f.cfg.hidden_size = 200;
  f.cfg.num_kv_heads = 3;
  f.cfg.head_dim = f.cfg.rope_dims = 40;
  f.cfg.intermediate_size = 333;
  return f;
}

// A window (48) shorter than the context (64) bounds the context to it.
Family mistral() {
  Family f{"mistral", "mistral", test::odd_config(), R"(, "sliding_window": 48)"};
  f.cfg.family = "mistral";
  return f;
}

Shape param_shape(const Graph& g, const std::string& name) {
  for (const Node& n : g.nodes())
    if (n.op == OpKind::Param && n.name == name) return g.value(n.outputs[0]).shape;
  ADD_FAILURE() << "no param " << name;
  return {};
}

test::Weights weights_of(const LlamaConfig& c) { return test::random_weights(build_llama_graph(c, 1, 1, DType::F32)); }

void write_hf_dir(const fs::path& dir, const Family& f, const test::Weights& w) {
  const LlamaConfig& c = f.cfg;
  Graph g = build_llama_graph(c, 1, 1, DType::F32);
  std::map<std::string, std::pair<Shape, std::vector<float>>> ts;
  for (const auto& [name, v] : w) ts[llama_hf_name(name)] = {param_shape(g, name), v};
  test::write_safetensors(dir / "model.safetensors", ts);
  test::write_text(dir / "config.json",
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

// As convert_hf_to_gguf.py writes the family: LLaMA's Q/K rows permuted for
// interleaved pairs and Llama 3's divisors as rope_freqs.weight; Qwen's as
// they are.
void write_gguf(const fs::path& path, const Family& f, const test::Weights& w) {
  const LlamaConfig& c = f.cfg;
  const std::string a = f.model_type + ".";
  test::GgufWriter gw;
  gw.str("general.architecture", f.model_type)
      .u32(a + "context_length", 64)
      .u32(a + "embedding_length", uint32_t(c.hidden_size))
      .u32(a + "feed_forward_length", uint32_t(c.intermediate_size))
      .u32(a + "block_count", uint32_t(c.num_layers))
      .u32(a + "attention.head_count", uint32_t(c.num_heads))
      .u32(a + "attention.head_count_kv", uint32_t(c.num_kv_heads))
      .u32(a + "attention.key_length", uint32_t(c.head_dim))
      .u32(a + "attention.value_length", uint32_t(c.head_dim))
      .f32(a + "attention.layer_norm_rms_epsilon", c.rms_eps)
      .f32(a + "rope.freq_base", c.rope_theta);
  Graph g = build_llama_graph(c, 1, 1, DType::F32);
  const bool permute = f.model_type == "llama";
  for (const auto& [name, v] : w) {
    const Shape s = param_shape(g, name);
    const bool q = name.find("attn_q.weight") != std::string::npos, k = name.find("attn_k.weight") != std::string::npos;
    if (permute && (q || k)) gw.tensor(name, s, test::to_gguf_rows(v, q ? c.num_heads : c.num_kv_heads, c.head_dim, s[1]));
    else gw.tensor(name, s, v);
  }
  if (!c.rope_freq_divisors.empty())
    gw.tensor("rope_freqs.weight", {int64_t(c.rope_freq_divisors.size())}, c.rope_freq_divisors);
  gw.write(path);
}

std::vector<int32_t> random_ids(int n, int vocab, uint64_t seed) {
  std::vector<float> r = test::random_floats(size_t(n), seed, 0.f, float(vocab) - 0.01f);
  std::vector<int32_t> ids;
  for (float x : r) ids.push_back(int32_t(x));
  return ids;
}

// A prompt of 11 tokens (prefill), then 3 more one at a time (cached decode
// steps: RoPE fused into kv_write and attention), each against the reference.
void expect_matches_reference(const std::string& path, const Family& f, const test::Weights& w, bool kv_cache) {
  GeneratorOptions o;
  o.threads = 1;
  o.kv_cache = kv_cache;
  LlamaGenerator gen(path, o);
  const LlamaConfig& got = gen.config();
  EXPECT_EQ(got.qkv_bias, f.cfg.qkv_bias);
  EXPECT_EQ(got.qk_norm, f.cfg.qk_norm);
  EXPECT_EQ(got.head_dim, f.cfg.head_dim);
  EXPECT_EQ(got.tie_embeddings, f.cfg.tie_embeddings);
  ASSERT_EQ(got.rope_freq_divisors.size(), f.cfg.rope_freq_divisors.size());
  for (size_t i = 0; i < got.rope_freq_divisors.size(); ++i)
    EXPECT_NEAR(got.rope_freq_divisors[i], f.cfg.rope_freq_divisors[i], 1e-5 * f.cfg.rope_freq_divisors[i]) << i;
  std::vector<int32_t> ids = random_ids(14, f.cfg.vocab_size, 7);
  for (size_t n = 11; n <= ids.size(); ++n) {
    std::vector<int32_t> prefix(ids.begin(), ids.begin() + long(n));
    test::expect_close(gen.next_logits(prefix), test::reference(f.cfg, w, prefix, int(n) - 1), 1e-4,
                       f.name + " logits after " + std::to_string(n) + " tokens from " + path);
  }
  if (kv_cache) EXPECT_EQ(gen.decode_steps(), 3u);
}

class DecoderFamily : public ::testing::TestWithParam<Family (*)()> {};

TEST_P(DecoderFamily, HuggingFaceDirectoryMatchesTheReference) {
  const Family f = GetParam()();
  test::TempDir d;
  const test::Weights w = weights_of(f.cfg);
  write_hf_dir(d.path(), f, w);
  expect_matches_reference(d.path().string(), f, w, true);
  expect_matches_reference(d.path().string(), f, w, false);
}

TEST_P(DecoderFamily, GgufMatchesTheReference) {
  const Family f = GetParam()();
  if (f.model_type == "mistral") GTEST_SKIP() << "Mistral GGUFs are architecture llama (the llama3 case)";
  test::TempDir d;
  const test::Weights w = weights_of(f.cfg);
  write_gguf(d.path() / "m.gguf", f, w);
  expect_matches_reference((d.path() / "m.gguf").string(), f, w, true);
}

INSTANTIATE_TEST_SUITE_P(Families, DecoderFamily, ::testing::Values(&llama3, &qwen2, &qwen3, &mistral),
                         [](const auto& info) { return info.param().name; });

TEST(DecoderFamilies, MistralWindowBoundsTheContext) {
  test::TempDir d;
  const Family f = mistral();
  write_hf_dir(d.path(), f, weights_of(f.cfg));
  EXPECT_EQ(load_llama_config(d.path().string()).max_positions, 48);
}

TEST(DecoderFamilies, RefusalsNameTheFieldAndTheFamiliesThatLoad) {
  test::TempDir d;
  Family f = llama3();
  write_hf_dir(d.path(), f, weights_of(f.cfg));
  auto refused = [&](const std::string& json, const std::string& want) {
    test::write_text(d.path() / "config.json", json);
    std::string e = test::error_of([&] { load_llama_config(d.path().string()); });
    EXPECT_NE(e.find(want), std::string::npos) << e;
    EXPECT_NE(e.find("config.json"), std::string::npos) << e;
  };
  const std::string base = R"({"vocab_size": 301, "hidden_size": 288, "intermediate_size": 776,
    "num_hidden_layers": 2, "num_attention_heads": 6)";
  refused(base + R"(, "model_type": "gemma2"})", "llama, mistral, qwen2, qwen3");
  refused(base + R"(, "model_type": "llama", "rope_scaling": {"rope_type": "yarn", "factor": 4.0}})", "yarn");
  refused(base + R"(, "model_type": "llama", "attention_bias": true})", "attention_bias");
  refused(base + R"(, "model_type": "llama", "mlp_bias": true})", "mlp_bias");
  // A GGUF of another architecture.
  test::GgufWriter gw;
  gw.str("general.architecture", "gemma2");
  gw.write(d.path() / "g.gguf");
  std::string e = test::error_of([&] { LlamaGguf g((d.path() / "g.gguf").string()); });
  EXPECT_NE(e.find("llama, qwen2, qwen3"), std::string::npos) << e;
  EXPECT_NE(e.find("g.gguf"), std::string::npos) << e;
}

}  // namespace
}  // namespace rlx
