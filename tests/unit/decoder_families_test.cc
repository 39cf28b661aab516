// The decoder families (Llama 3 rope scaling, Qwen2, Qwen3, Mistral, Phi-3,
// Gemma 2, Gemma 3) from
// real files: a Hugging Face directory (config.json + model.safetensors) and
// a GGUF written as llama.cpp's converter lays it out, with random weights
// of odd sizes; logits after a prompt and after each cached decode step
// against the double-precision reference (tests/models/llama_reference.h).
#include <gtest/gtest.h>

#include "cpu_quant_kernel_scope.h"
#include "engine/engine_impl.h"
#include "models/decoder_family_files.h"  // tests/models
#include "models/gguf_writer.h"           // tests/models
#include "models/llama_batch_check.h"  // tests/models
#include "models/llama_generator.h"
#include "models/llama_reference.h"  // tests/models
#include "rlx/llm.h"
#include "test_util.h"

namespace rlx {
namespace {

using test::Family;

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
  EXPECT_FLOAT_EQ(got.embed_scale, f.cfg.embed_scale);
  EXPECT_EQ(got.sandwich_norms, f.cfg.sandwich_norms);
  EXPECT_EQ(got.gelu_tanh_ffn, f.cfg.gelu_tanh_ffn);
  if (f.cfg.query_scale > 0) EXPECT_NEAR(got.query_scale, f.cfg.query_scale, 1e-6);
  EXPECT_FLOAT_EQ(got.attn_softcap, f.cfg.attn_softcap);
  EXPECT_FLOAT_EQ(got.final_softcap, f.cfg.final_softcap);
  EXPECT_EQ(got.sliding_window, f.cfg.sliding_window);
  EXPECT_EQ(got.local_layers, f.cfg.local_layers);
  EXPECT_FLOAT_EQ(got.local_rope_theta, f.cfg.local_rope_theta);
  std::vector<int32_t> ids = test::random_ids(14, f.cfg.vocab_size, 7);
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
  const test::Weights w = test::weights_of(f.cfg);
  test::write_hf_dir(d.path(), f, w);
  expect_matches_reference(d.path().string(), f, w, true);
  expect_matches_reference(d.path().string(), f, w, false);
}

TEST_P(DecoderFamily, GgufMatchesTheReference) {
  Family f = GetParam()();
  if (f.model_type == "mistral") GTEST_SKIP() << "Mistral GGUFs are architecture llama (the llama3 case)";
  // Gemma GGUFs carry no query_pre_attn_scalar: llama.cpp's rule gives head_dim here.
  if (test::is_gemma(f)) f.cfg.query_scale = 1.f / std::sqrt(float(f.cfg.head_dim));
  test::TempDir d;
  const test::Weights w = test::weights_of(f.cfg);
  test::write_gguf(d.path() / "m.gguf", f, w);
  expect_matches_reference((d.path() / "m.gguf").string(), f, w, true);
}

INSTANTIATE_TEST_SUITE_P(Families, DecoderFamily,
                         ::testing::Values(&test::llama3, &test::qwen2, &test::qwen3, &test::mistral, &test::phi3,
                                           &test::gemma2, &test::gemma3),
                         [](const auto& info) { return info.param().name; });

// The engine's pooled graphs (LlamaPool) over each family: greedy
// continuations of two prompts equal the single-sequence generator's (itself
// checked against the reference above).
TEST_P(DecoderFamily, EngineEqualsTheSingleSequenceGenerator) {
  const Family f = GetParam()();
  test::TempDir d;
  test::write_hf_dir(d.path(), f, test::weights_of(f.cfg));
  LlmOptions lo;
  lo.threads = 1;
  lo.max_sequences = 2;
  LLM llm(d.path().string(), lo);
  GeneratorOptions go;
  go.threads = 1;
  LlamaGenerator single(d.path().string(), go);
  const std::vector<int32_t> ids = test::random_ids(13, f.cfg.vocab_size, 21);
  std::vector<std::vector<int32_t>> want;
  for (size_t n : {13, 6}) want.push_back(test::single_greedy(single, {ids.begin(), ids.begin() + long(n)}, 8));
  std::vector<Generation> got(2);
  for (size_t i = 0; i < 2; ++i) {
    GenerateOptions o;
    o.max_tokens = 8;
    o.ignore_eos = true;
    got[i] = llm.generate(std::vector<int32_t>(ids.begin(), ids.begin() + (i ? 6 : 13)), o);
    EXPECT_EQ(got[i].ids, want[i]) << f.name << " prompt " << i;
  }
}

// FP8's logits against the float reference, of the largest |logit|: 0.046
// to 0.097 measured over the families (each weight within 2^-4 of itself).
constexpr double kFp8Logits = 1.5e-1;

// Weights quantized at load (Q8_0, then FP8) under each family's extra pieces: the
// biases after a merged Q8_0 Q|K|V product, q/k norms, Phi-3's fused
// products as matmul_q. Sizes are multiples of 32 (quantization blocks); the
// logits stay within Q8_0's error of the float reference.
TEST_P(DecoderFamily, QuantizedAtLoadStaysCloseToTheReference) {
  Family f = GetParam()();
  f.cfg.hidden_size = 64;
  f.cfg.intermediate_size = 96;
  f.cfg.num_heads = 4;
  f.cfg.num_kv_heads = 2;
  f.cfg.head_dim = f.cfg.rope_dims = 16;
  if (f.model_type == "llama") f.cfg.rope_freq_divisors = test::hf_llama3_divisors(16, 10000, 8, 1, 4, 16);
  else if (!f.cfg.rope_freq_divisors.empty()) f.cfg.rope_freq_divisors.resize(8, f.cfg.rope_freq_divisors[0]);  // linear
  if (f.cfg.embed_scale > 0) f.cfg.embed_scale = std::sqrt(64.f);
  test::TempDir d;
  const test::Weights w = test::weights_of(f.cfg);
  test::write_hf_dir(d.path(), f, w);
  GeneratorOptions o;
  o.threads = 1;
  o.quantize = QuantType::Q8_0;
  // The f32 kernel sees the weights' rounding alone; the default kernel adds
  // the int8 activations' (cpu_quant_dot_test bounds each kernel itself).
  for (cpu::QuantKernel kernel : {cpu::QuantKernel::F32, cpu::quant_kernel()}) {
    const test::QuantKernelScope scope(kernel);
    LlamaGenerator gen(d.path().string(), o);
    EXPECT_GE(gen.quantized_weights().size(), size_t(f.cfg.fused_qkv_gate_up ? 3 : 5) * 2);
    std::vector<int32_t> ids = test::random_ids(12, f.cfg.vocab_size, 5);
    for (size_t n = 10; n <= ids.size(); ++n) {
      std::vector<int32_t> prefix(ids.begin(), ids.begin() + long(n));
      test::expect_close(gen.next_logits(prefix), test::reference(f.cfg, w, prefix, int(n) - 1),
                         kernel == cpu::QuantKernel::F32 ? 3e-2 : 5e-2,
                         f.name + " Q8_0 logits after " + std::to_string(n) + " tokens, kernel " +
                             std::to_string(int(kernel)));
    }
  }
  // FP8 (its e4m3 codes round each weight to 3 bits of mantissa: a looser
  // bound than Q8_0's), which every kernel setting reads in f32.
  o.quantize = QuantType::FP8;
  LlamaGenerator gen(d.path().string(), o);
  EXPECT_GE(gen.quantized_weights().size(), size_t(f.cfg.fused_qkv_gate_up ? 3 : 5) * 2);
  const std::vector<int32_t> ids = test::random_ids(12, f.cfg.vocab_size, 5);
  test::expect_close(gen.next_logits(ids), test::reference(f.cfg, w, ids, int(ids.size()) - 1), kFp8Logits,
                     f.name + " FP8 logits");
}

// A window makes layers local, as transformers lays them out: Mistral's
// every layer; Qwen2's (use_sliding_window) from max_window_layers on, or as
// layer_types says; a window as long as the context changes nothing.
TEST(DecoderFamilies, SlidingWindowsMakeLayersLocal) {
  test::TempDir d;
  const Family f = test::mistral();
  test::write_hf_dir(d.path(), f, test::weights_of(f.cfg));
  const LlamaConfig m = load_llama_config(d.path().string());
  EXPECT_EQ(m.max_positions, 64);
  EXPECT_EQ(m.sliding_window, 6);
  EXPECT_EQ(m.local_layers, std::vector<bool>({true, true}));
  const std::string base = R"({"model_type": "qwen2", "vocab_size": 301, "hidden_size": 288,
    "intermediate_size": 776, "num_hidden_layers": 3, "num_attention_heads": 6, "max_position_embeddings": 64, )";
  auto load = [&](const std::string& rest) {
    test::write_text(d.path() / "config.json", base + rest + "}");
    return load_llama_config(d.path().string());
  };
  const LlamaConfig q = load(R"("use_sliding_window": true, "sliding_window": 9, "max_window_layers": 1)");
  EXPECT_EQ(q.sliding_window, 9);
  EXPECT_EQ(q.local_layers, std::vector<bool>({false, true, true}));
  const LlamaConfig t = load(R"("use_sliding_window": true, "sliding_window": 9,
    "layer_types": ["sliding_attention", "full_attention", "sliding_attention"])");
  EXPECT_EQ(t.local_layers, std::vector<bool>({true, false, true}));
  EXPECT_EQ(load(R"("use_sliding_window": false, "sliding_window": 9)").sliding_window, 0);
  EXPECT_EQ(load(R"("use_sliding_window": true, "sliding_window": 64)").sliding_window, 0);
  const std::string e = test::error_of([&] { load(R"("use_sliding_window": true, "sliding_window": 9,
    "layer_types": ["sliding_attention", "local"])"); });
  EXPECT_NE(e.find("2 layer types for 3 layers"), std::string::npos) << e;
}

// Window layers keep a ring of window + run + 32 rows where that is shorter
// than the context (64): 60 tokens through rings of 53-54 rows, the prompt
// of 41 in runs of at most 16, then decode steps past the ring's end, the
// logits after each against the double reference; the greedy tokens of the
// state-fed loop equal those of a generator whose caches hold every row.
TEST(DecoderFamilies, WindowLayersKeepARingShorterThanTheContext) {
  for (auto family : {&test::mistral, &test::gemma2, &test::gemma3}) {
    const Family f = family();
    test::TempDir d;
    const test::Weights w = test::weights_of(f.cfg);
    test::write_hf_dir(d.path(), f, w);
    GeneratorOptions o;
    o.threads = 1;
    o.prefill_chunk = 16;
    LlamaGenerator gen(d.path().string(), o);
    const std::vector<int32_t> ids = test::random_ids(60, f.cfg.vocab_size, 11);
    for (size_t n = 41; n <= ids.size(); ++n) {
      std::vector<int32_t> prefix(ids.begin(), ids.begin() + long(n));
      test::expect_close(gen.next_logits(prefix), test::reference(f.cfg, w, prefix, int(n) - 1), 1e-4,
                         f.name + " ring logits after " + std::to_string(n) + " tokens");
    }
    EXPECT_EQ(gen.window_run(), 16) << f.name;
    EXPECT_EQ(gen.decode_steps(), 19u) << f.name;
    for (int64_t b : gen.buckets()) EXPECT_LE(b, 16) << f.name;
    const int64_t ring = f.cfg.sliding_window + 16 + kKvRingMargin;
    for (int l = 0; l < f.cfg.num_layers; ++l)
      EXPECT_EQ(llama_kv_rows(gen.config(), l, gen.cache_len(), 16), f.cfg.local_layers[size_t(l)] ? ring : 64)
          << f.name << " layer " << l;

    GeneratorOptions full = o;
    full.prefill_chunk = 64;
    LlamaGenerator whole(d.path().string(), full);
    LlamaGenerator ringed(d.path().string(), o);
    const std::vector<int32_t> prompt(ids.begin(), ids.begin() + 37);
    EXPECT_EQ(test::single_greedy(ringed, prompt, 27), test::single_greedy(whole, prompt, 27)) << f.name;
    EXPECT_EQ(whole.window_run(), 0) << f.name;
    EXPECT_GT(ringed.device_steps(), 20u) << f.name;
  }
}

// The engine's slots keep rings too: a sequence continued past the ring's
// end gives the single generator's tokens; cut back further than its last
// cached token, it loses its cache (the window before the cut is gone) and
// runs again from the start, still giving the same tokens.
TEST(DecoderFamilies, EngineSlotsKeepWindowRings) {
  const Family f = test::gemma2();
  test::TempDir d;
  test::write_hf_dir(d.path(), f, test::weights_of(f.cfg));
  LlmOptions lo;
  lo.threads = 1;
  lo.max_sequences = 2;
  lo.prefill_chunk = 16;
  LLM llm(d.path().string(), lo);
  ASSERT_TRUE(pool_runner_of(llm.engine()).window_rings());
  GeneratorOptions go;
  go.threads = 1;
  go.prefill_chunk = 64;
  LlamaGenerator single(d.path().string(), go);
  const std::vector<int32_t> ids = test::random_ids(35, f.cfg.vocab_size, 23);
  GenerateOptions o;
  o.max_tokens = 22;
  o.ignore_eos = true;
  auto seq = llm.new_sequence();
  const Generation first = llm.generate(*seq, ids, o);
  EXPECT_EQ(first.ids, test::single_greedy(single, ids, 22));
  EXPECT_EQ(seq->cached_tokens(), 56);
  seq->truncate(55);
  EXPECT_EQ(seq->cached_tokens(), 55);
  seq->truncate(30);
  EXPECT_EQ(seq->cached_tokens(), 0);
  o.max_tokens = 10;
  const std::vector<int32_t> kept(seq->tokens());
  EXPECT_EQ(llm.generate(*seq, {}, o).ids, test::single_greedy(single, kept, 10));
}

// transformers 5 writes rope_theta and the scaling inside one rope_parameters
// object; read from the old places only, theta fell back to 10000 and Qwen2
// (theta 10^6) drifted from transformers at the 29th generated token.
TEST(DecoderFamilies, RopeParametersReadAsTheOlderKeys) {
  test::TempDir d;
  const std::string base = R"({"model_type": "qwen2", "vocab_size": 301, "hidden_size": 288,
    "intermediate_size": 776, "num_hidden_layers": 2, "num_attention_heads": 6, "num_key_value_heads": 2, )";
  auto load = [&](const std::string& rope) {
    test::write_text(d.path() / "config.json", base + rope + "}");
    return load_llama_config(d.path().string());
  };
  EXPECT_EQ(load(R"("rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0})").rope_theta, 1e6f);
  EXPECT_EQ(load(R"("rope_theta": 1000000.0)").rope_theta, 1e6f);
  EXPECT_EQ(load(R"("max_position_embeddings": 64)").rope_theta, 10000.f);
  const std::string scaling = R"("rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
    "high_freq_factor": 4.0, "original_max_position_embeddings": 16)";
  const LlamaConfig v5 = load(R"("rope_parameters": {"rope_theta": 500000.0, )" + scaling + "}");
  const LlamaConfig v4 = load(R"("rope_theta": 500000.0, "rope_scaling": {)" + scaling + "}");
  EXPECT_EQ(v5.rope_theta, 500000.f);
  ASSERT_EQ(v5.rope_freq_divisors.size(), size_t(24));
  EXPECT_EQ(v5.rope_freq_divisors, v4.rope_freq_divisors);
  EXPECT_EQ(v5.rope_freq_divisors, llama3_rope_divisors(48, 500000.f, 8, 1, 4, 16));
  for (const auto& rope_want : std::vector<std::pair<std::string, std::string>>{
           {R"("rope_parameters": {"rope_type": "dynamic", "factor": 0.0})", "rope_parameters.factor"},
           {R"("rope_parameters": {"rope_theta": -1.0})", "rope_parameters.rope_theta: -1.0 is outside"},
           {R"("rope_parameters": 5)", "rope_parameters: must be a JSON object"},
           {R"("rope_parameters": {"partial_rotary_factor": 0.5})", "partial_rotary_factor"}}) {
    // Named, not a structured binding: clang 14 cannot capture one in a lambda.
    const std::string& rope = rope_want.first;
    const std::string& want = rope_want.second;
    std::string e = test::error_of([&] { load(rope); });
    EXPECT_NE(e.find(want), std::string::npos) << e;
    EXPECT_NE(e.find("config.json"), std::string::npos) << e;
  }
}

// Each Gemma piece changes these models' logits by far more than the
// tolerance, so the reference checks above would catch any one missing: the
// reference with the piece off is away from rlx's logits.
TEST(DecoderFamilies, GemmaPiecesEachChangeTheLogits) {
  for (auto family : {&test::gemma2, &test::gemma3}) {
    const Family f = family();
    test::TempDir d;
    const test::Weights w = test::weights_of(f.cfg);
    test::write_hf_dir(d.path(), f, w);
    GeneratorOptions o;
    o.threads = 1;
    o.kv_cache = false;
    LlamaGenerator gen(d.path().string(), o);
    const std::vector<int32_t> ids = test::random_ids(14, f.cfg.vocab_size, 7);
    const std::vector<float> got = gen.next_logits(ids);
    test::expect_close(got, test::reference(f.cfg, w, ids, 13), 1e-4, f.name);
    auto far_without = [&](const std::string& what, auto change) {
      LlamaConfig c = f.cfg;
      change(c);
      const std::vector<double> ref = test::reference(c, w, ids, 13);
      double gap = 0, top = 0;
      for (size_t i = 0; i < ref.size(); ++i) {
        gap = std::max(gap, std::abs(double(got[i]) - ref[i]));
        top = std::max(top, std::abs(ref[i]));
      }
      EXPECT_GT(gap, 1e-2 * top) << f.name << " without " << what;
    };
    far_without("the window", [](LlamaConfig& c) { c.sliding_window = 0; });
    far_without("the embedding scale", [](LlamaConfig& c) { c.embed_scale = 0; });
    far_without("the query scale", [](LlamaConfig& c) { c.query_scale = 0; });
    far_without("the post-norms' gains", [&](LlamaConfig& c) { c.sandwich_norms = false; });
    if (f.cfg.attn_softcap > 0) far_without("the attention cap", [](LlamaConfig& c) { c.attn_softcap = 0; });
    if (f.cfg.final_softcap > 0) far_without("the final cap", [](LlamaConfig& c) { c.final_softcap = 0; });
    if (f.cfg.local_rope_theta > 0) far_without("the local rope base", [](LlamaConfig& c) { c.local_rope_theta = 0; });
  }
}

// Gemma3ForConditionalGeneration's files: model_type gemma3 whose
// text_config is the decoder, tensors under model.language_model.
TEST(DecoderFamilies, Gemma3MultimodalConfigLoadsItsLanguageModel) {
  const Family f = test::gemma3();
  test::TempDir d;
  const test::Weights w = test::weights_of(f.cfg);
  test::write_hf_dir(d.path(), f, w, /*multimodal=*/true);
  expect_matches_reference(d.path().string(), f, w, true);
}

TEST(DecoderFamilies, GemmaRefusalsNameTheField) {
  test::TempDir d;
  auto refused = [&](const std::string& json, const std::string& want) {
    test::write_text(d.path() / "config.json", json);
    std::string e = test::error_of([&] { load_llama_config(d.path().string()); });
    EXPECT_NE(e.find(want), std::string::npos) << e;
    EXPECT_NE(e.find("config.json"), std::string::npos) << e;
  };
  const std::string base = R"({"vocab_size": 301, "hidden_size": 224, "intermediate_size": 333,
    "num_hidden_layers": 2, "num_attention_heads": 6, "num_key_value_heads": 2, "head_dim": 40)";
  refused(base + R"(, "model_type": "gemma2", "hidden_activation": "relu"})", "hidden_activation 'relu'");
  refused(base + R"(, "model_type": "gemma3_text", "rope_scaling": {"rope_type": "yarn", "factor": 4.0}})", "yarn");
  refused(base + R"(, "model_type": "gemma3_text", "layer_types": ["full_attention"]})", "1 layer types for 2 layers");
  refused(base + R"(, "model_type": "gemma3_text", "layer_types": ["chunked", "full_attention"]})", "chunked");
  refused(base + R"(, "model_type": "gemma2", "query_pre_attn_scalar": 0})", "query_pre_attn_scalar");
  refused(R"({"model_type": "gemma3"})", "text_config");
}

// Dynamic NTK scales the base only past the original context: within it
// the rotation is the default one, and the context is bounded there.
TEST(DecoderFamilies, DynamicNtkIsTheDefaultRotationWithinTheOriginalContext) {
  test::TempDir d;
  const std::string base = R"({"vocab_size": 301, "hidden_size": 288, "intermediate_size": 776,
    "num_hidden_layers": 2, "num_attention_heads": 6, "model_type": "llama", "rope_theta": 50000.0,
    "max_position_embeddings": 4096)";
  test::write_text(d.path() / "config.json", base + "}");
  const LlamaConfig plain = load_llama_config(d.path().string());
  test::write_text(d.path() / "config.json", base + R"(, "rope_scaling": {"rope_type": "dynamic", "factor": 2.0}})");
  const LlamaConfig dynamic = load_llama_config(d.path().string());
  EXPECT_EQ(dynamic.rope_theta, plain.rope_theta);
  EXPECT_TRUE(dynamic.rope_freq_divisors.empty());
  EXPECT_EQ(dynamic.rope_dims, plain.rope_dims);
  EXPECT_EQ(dynamic.max_positions, 4096);
  // An original context shorter than max_position_embeddings bounds it.
  test::write_text(d.path() / "config.json",
                   base + R"(, "rope_scaling": {"type": "dynamic", "factor": 2.0,
                                "original_max_position_embeddings": 1000}})");
  const LlamaConfig bounded = load_llama_config(d.path().string());
  EXPECT_EQ(bounded.max_positions, 1000);
  EXPECT_TRUE(bounded.rope_freq_divisors.empty());
}

TEST(DecoderFamilies, RefusalsNameTheFieldAndTheFamiliesThatLoad) {
  test::TempDir d;
  Family f = test::llama3();
  test::write_hf_dir(d.path(), f, test::weights_of(f.cfg));
  auto refused = [&](const std::string& json, const std::string& want) {
    test::write_text(d.path() / "config.json", json);
    std::string e = test::error_of([&] { load_llama_config(d.path().string()); });
    EXPECT_NE(e.find(want), std::string::npos) << e;
    EXPECT_NE(e.find("config.json"), std::string::npos) << e;
  };
  const std::string base = R"({"vocab_size": 301, "hidden_size": 288, "intermediate_size": 776,
    "num_hidden_layers": 2, "num_attention_heads": 6)";
  refused(base + R"(, "model_type": "falcon"})", "llama, mistral, qwen2, qwen3, phi3, gemma2, gemma3_text, gemma3");
  refused(base + R"(, "model_type": "llama", "rope_scaling": {"rope_type": "ntk-by-parts", "factor": 4.0}})",
          "'ntk-by-parts' is not supported (llama3, linear, dynamic, yarn");
  refused(base + R"(, "model_type": "llama", "rope_scaling": {"rope_type": "dynamic"}})", "factor");
  refused(base + R"(, "model_type": "llama", "attention_bias": true})", "attention_bias");
  refused(base + R"(, "model_type": "llama", "mlp_bias": true})", "mlp_bias");
  // A GGUF of another architecture.
  test::GgufWriter gw;
  gw.str("general.architecture", "falcon");
  gw.write(d.path() / "g.gguf");
  std::string e = test::error_of([&] { LlamaGguf g((d.path() / "g.gguf").string()); });
  EXPECT_NE(e.find("llama, qwen2, qwen3, phi3, gemma2, gemma3"), std::string::npos) << e;
  EXPECT_NE(e.find("g.gguf"), std::string::npos) << e;
}

}  // namespace
}  // namespace rlx
