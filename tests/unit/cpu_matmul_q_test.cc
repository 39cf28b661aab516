// matmul_q on the CPU (the reference backend: its f32 kernel) against
// dequantize-then-f32 product in double: odd n, k a multiple of 32, 1..17
// rows (more than 8 take the dequantized-scratch path, asserted from the
// schedule), every activation dtype, every format (FP8 under any kernel
// setting). (The integer kernels:
// cpu_quant_dot_test.cc.) The reference rounding on hand-checked
// blocks, GGUF blocks repacked as the quantizer packs them, rows that are
// no multiple of 32 rejected by name, and the tiny LLaMA quantized at load.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <variant>

#include "backends/backend.h"
#include "backends/cpu/cpu_quant_rows16.h"
#include "models/llama_generator.h"
#include "models/llama_hf.h"
#include "models/llama_reference.h"  // tests/models
#include "models/test_files.h"       // tests/models
#include "cpu_quant_kernel_scope.h"
#include "quant_weights.h"
#include "rlx/session.h"
#include "thunks/thunk.h"

namespace rlx {
namespace {

using test::QuantWeight;

const std::string kTiny = std::string(RLX_SOURCE_DIR) + "/tests/data/tiny_llama.gguf";

// x [m, k] . W^T (+ bias) over W's params "w.quants" and "w.scales".
Graph product_graph(const QuantWeight& w, int64_t m, DType dt, bool bias) {
  Graph g;
  ValueId x = g.input("x", {m, w.k}, dt);
  ValueId q = g.param("w.quants", w.quants_shape(), DType::I32), s = g.param("w.scales", w.scales_shape(), DType::F16);
  g.output("out", g.matmul_q(x, q, s, w.type, bias ? g.input("bias", {w.n}, dt) : -1));
  return g;
}

void set_weight(Executable& exe, const QuantWeight& w) {
  exe.set_param("w.quants", HostTensor{DType::I32, w.quants_shape(), w.quants});
  exe.set_param("w.scales", HostTensor{DType::F16, w.scales_shape(), w.scales});
}

TEST(CpuMatMulQ, EqualsDequantizeThenProductAtOddSizes) {
  const test::QuantKernelScope f32(cpu::QuantKernel::F32);
  uint64_t seed = 500;
  for (QuantType t : {QuantType::Q8_0, QuantType::Q4_0, QuantType::Q4_1, QuantType::FP8})
    for (DType dt : {DType::F32, DType::F16, DType::BF16})
      for (int64_t m : {1, 3, 8, 9, 17}) {
        const bool bias = m % 2 == 1;
        const QuantWeight w = test::random_quant_weight(t, 37, 160, seed += 10);
        auto exe = compile(product_graph(w, m, dt, bias), CompileOptions{});
        set_weight(*exe, w);
        const std::vector<float> x = test::quantize(test::random_floats(size_t(m * w.k), seed + 1), dt);
        const std::vector<float> b = test::quantize(test::random_floats(size_t(w.n), seed + 2), dt);
        std::map<std::string, HostTensor> in{{"x", HostTensor::from_f32({m, w.k}, x, dt)}};
        if (bias) in["bias"] = HostTensor::from_f32({w.n}, b, dt);
        const std::string what = std::string(quant_type_name(t)) + " " + std::string(dtype_name(dt)) +
                                 " m=" + std::to_string(m);
        test::expect_close(test::to_double(exe->run(in).at("out").to_f32()),
                           test::quant_product_reference(x, w, m, bias ? &b : nullptr), test::tol_for(dt, 4), what);
        // The path: compiled for the CPU, no row count dequantizes W into a
        // scratch (keep_products_quantized); the kernel takes 8 rows at a time.
        int thunks = 0;
        for (const Thunk& th : exe->schedule().thunks)
          if (const auto* p = std::get_if<MatMulQParams>(&th.params)) {
            ++thunks;
            EXPECT_EQ(p->dequantized, kNoBuffer) << what;
          }
        EXPECT_EQ(thunks, 1) << what;
      }
}

// FP8 has no integer kernel: under every kernel setting (the default is
// the integer one where the processor has it) its product is the f32
// kernel's, within f32 rounding of the dequantized weights' product, and
// its weights are never interleaved.
TEST(CpuMatMulQ, Fp8TakesTheF32KernelUnderEveryKernelSetting) {
  uint64_t seed = 5100;
  for (cpu::QuantKernel kernel : {cpu::QuantKernel::F32, cpu::quant_kernel()})
    for (int64_t m : {1, 3, 17}) {
      const test::QuantKernelScope scope(kernel);
      const QuantWeight w = test::random_quant_weight(QuantType::FP8, 53, 256, seed += 10);
      auto exe = compile(product_graph(w, m, DType::F32, true), CompileOptions{});
      set_weight(*exe, w);
      const std::vector<float> x = test::random_floats(size_t(m * w.k), seed + 1);
      const std::vector<float> b = test::random_floats(size_t(w.n), seed + 2);
      const std::map<std::string, HostTensor> in{{"x", HostTensor::from_f32({m, w.k}, x, DType::F32)},
                                                 {"bias", HostTensor::from_f32({w.n}, b, DType::F32)}};
      const std::string what = std::string(cpu::quant_kernel_name(kernel)) + " m=" + std::to_string(m);
      for (const Binding& o : exe->schedule().output_bindings)
        exe->backend().write_binding(o, test::nan_bytes(size_t(numel(o.shape)), o.dtype).data());
      const uint64_t packs = cpu::rows16_calls();
      const std::vector<float> got = exe->run(in).at("out").to_f32();
      EXPECT_EQ(cpu::rows16_calls(), packs) << what;
      test::expect_close(test::to_double(got), test::quant_product_reference(x, w, m, &b), test::tol_for(DType::F32),
                         what);
    }
}

// Q8_0: d = amax / 127, q = round(x / d); Q4_0: d = (the value of largest
// magnitude, the first on ties) / -8, q = min(15, trunc(x / d + 8.5)).
TEST(QuantizeRow, RoundsAsLlamaCppsReferenceQuantizers) {
  float x[32];
  for (int j = 0; j < 32; ++j) x[j] = float(j - 16);
  uint8_t q8[32], q4[16];
  uint16_t d8, d4;
  quantize_row(QuantType::Q8_0, x, 32, q8, &d8);
  EXPECT_EQ(d8, float_to_half(16.f / 127.f));
  EXPECT_EQ(int8_t(q8[0]), -127);
  EXPECT_EQ(int8_t(q8[17]), 8);    // 127/16 = 7.94 rounds up
  EXPECT_EQ(int8_t(q8[31]), 119);  // 15 * 7.94 = 119.06
  quantize_row(QuantType::Q4_0, x, 32, q4, &d4);
  EXPECT_EQ(half_to_float(d4), 2.f);  // -16 / -8
  EXPECT_EQ(q4[0], 0x80);             // x0 = -16 -> 0 (low), x16 = 0 -> 8 (high)
  EXPECT_EQ(q4[1], 0x91);             // x1 = -15 -> trunc(1.0) = 1, x17 = 1 -> 9
  EXPECT_EQ(q4[15], 0xf8);            // x15 = -1 -> 8, x31 = 15 -> min(15, 16)

  // Ties in magnitude keep the first one's sign; an all-zero block is zero.
  float y[32] = {3.f, -3.f};
  quantize_row(QuantType::Q4_0, y, 32, q4, &d4);
  EXPECT_EQ(half_to_float(d4), -0.375f);
  float back[32];
  dequantize_row(QuantType::Q4_0, q4, &d4, 32, back);
  EXPECT_EQ(back[0], 3.f);
  EXPECT_EQ(back[1], -2.625f);  // 16.5 clamps to 15: 7 * -0.375
  EXPECT_EQ(back[2], 0.f);
  // Q4_1: m = min = -16, d = (15 - -16) / 15, q = min(15, trunc((x - m) / d + 0.5)).
  uint16_t dm[2];
  quantize_row(QuantType::Q4_1, x, 32, q4, dm);
  EXPECT_EQ(dm[0], float_to_half(31.f / 15.f));
  EXPECT_EQ(half_to_float(dm[1]), -16.f);
  EXPECT_EQ(q4[0], 0x80);   // x0 = -16 -> 0, x16 = 0 -> trunc(7.74 + 0.5) = 8
  EXPECT_EQ(q4[15], 0xf7);  // x15 = -1 -> trunc(7.26 + 0.5) = 7, x31 = 15 -> 15
  dequantize_row(QuantType::Q4_1, q4, dm, 32, back);
  EXPECT_EQ(back[0], -16.f);
  EXPECT_FLOAT_EQ(back[31], 15.f * half_to_float(dm[0]) - 16.f);
  float zeros[32] = {};
  for (QuantType t : {QuantType::Q8_0, QuantType::Q4_0, QuantType::Q4_1}) {
    uint16_t d[2] = {1, 1};
    quantize_row(t, zeros, 32, q8, d);
    EXPECT_EQ(half_to_float(d[0]), 0.f);  // Q4_0's is -0 (0 / -8), as llama.cpp stores it
    dequantize_row(t, q8, d, 32, back);
    EXPECT_TRUE(std::all_of(back, back + 32, [](float v) { return v == 0.f; })) << quant_type_name(t);
  }
}

TEST(CpuMatMulQ, RowsThatAreNoMultipleOf32AreRejectedByName) {
  Graph g;
  ValueId x = g.input("x", {1, 48}, DType::F32);
  ValueId q = g.param("w.quants", {5, 6}, DType::I32), s = g.param("w.scales", {5, 1}, DType::F16);
  const std::string e = test::error_of([&] { g.add_node(OpKind::MatMulQ, {x, q, s}, MatMulQAttrs{QuantType::Q4_0}, "proj"); });
  EXPECT_NE(e.find("matmul_q 'proj'"), std::string::npos) << e;
  EXPECT_NE(e.find("multiple of 32"), std::string::npos) << e;

  LlamaConfig c;
  c.hidden_size = 48;
  c.num_heads = 2;
  c.num_kv_heads = 2;
  c.head_dim = 24;
  c.intermediate_size = 64;
  c.num_layers = 1;
  c.vocab_size = 10;
  const std::string l = test::error_of([&] { plan_llama_quantization(c, nullptr, QuantType::Q8_0); });
  EXPECT_NE(l.find("'blk.0.attn_q.weight'"), std::string::npos) << l;
  EXPECT_NE(l.find("48"), std::string::npos) << l;
}

// GGUF blocks (f16 scale or scale and min, then quants) split into the two
// params give the params quantizing the same floats gives.
TEST(CpuMatMulQ, GgufBlocksRepackToTheQuantizedParams) {
  const test::QuantKernelScope f32(cpu::QuantKernel::F32);
  // (FP8 has Q8_0's shapes: llama_param_sources reads its format from the op.)
  for (QuantType t : {QuantType::Q8_0, QuantType::Q4_0, QuantType::Q4_1, QuantType::FP8}) {
    const QuantWeight w = test::random_quant_weight(t, 5, 96, 77);
    const size_t qb = size_t(quant_block_bytes(t)), blocks = size_t(5 * 96 / kQuantBlock);
    const long sb = long(2 * quant_scales_per_block(t));
    std::vector<uint8_t> gguf;
    for (size_t b = 0; b < blocks; ++b) {
      gguf.insert(gguf.end(), w.scales.begin() + sb * long(b), w.scales.begin() + sb * long(b + 1));
      gguf.insert(gguf.end(), w.quants.begin() + long(qb * b), w.quants.begin() + long(qb * (b + 1)));
    }
    const Graph g = product_graph(w, 2, DType::F32, false);
    const std::vector<LlamaParamSource> src = llama_param_sources(g);
    ASSERT_EQ(src.size(), 1u);
    EXPECT_EQ(src[0].tensor, "w");
    EXPECT_EQ(src[0].shape, (Shape{5, 96}));
    EXPECT_TRUE(src[0].quant == t);
    auto from_blocks = compile(g, CompileOptions{}), from_floats = compile(g, CompileOptions{});
    set_quantized_weight_blocks(*from_blocks, src[0], gguf);
    set_quantized_weight(*from_floats, src[0], w.values);  // dequantized values quantize back to themselves
    const std::map<std::string, HostTensor> in{
        {"x", HostTensor::from_f32({2, 96}, test::random_floats(2 * 96, 78), DType::F32)}};
    EXPECT_EQ(from_blocks->run(in).at("out").bytes, from_floats->run(in).at("out").bytes) << quant_type_name(t);
    test::expect_close(from_blocks->run(in).at("out").to_f32(),
                       test::quant_product_reference(in.at("x").to_f32(), w, 2), 1e-5, "blocks");
  }
}

std::vector<int32_t> tiny_prompt(const LlamaGenerator& g) {
  std::ifstream in(std::string(RLX_SOURCE_DIR) + "/tests/data/tiny_llama_reference.json");
  EXPECT_TRUE(in);
  return g.tokenizer().encode(nlohmann::json::parse(in).at("prompt").get<std::string>());
}

// The tiny LLaMA quantized at load: every matmul is a matmul_q, the logits
// stay near the float model's, and decoding
// through the cache (one row: the matrix-vector path) gives the tokens and
// logits of recomputing the prefix (16-row buckets; with the f32 kernel the
// dequantized path).
TEST(LlamaQuantized, TinyLlamaQuantizedAtLoad) {
  for (QuantType t : {QuantType::Q8_0, QuantType::Q4_0, QuantType::Q4_1}) {
    GeneratorOptions o;
    o.threads = 1;
    LlamaGenerator plain(kTiny, o);
    o.quantize = t;
    LlamaGenerator cached(kTiny, o);
    o.kv_cache = false;
    LlamaGenerator recompute(kTiny, o);
    EXPECT_EQ(cached.quantized_weights().size(), 2u * 7 + 1) << quant_type_name(t);
    std::vector<int32_t> ids = tiny_prompt(plain);
    const std::vector<float> a = plain.next_logits(ids), b = cached.next_logits(ids);
    double scale = 0, diff = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      scale = std::max(scale, std::abs(double(a[i])));
      diff = std::max(diff, std::abs(double(a[i]) - b[i]));
    }
    EXPECT_LT(diff / scale, t == QuantType::Q8_0 ? 2e-2 : 2e-1) << quant_type_name(t);
    for (int step = 0; step < 8; ++step) {
      const std::vector<float> c = cached.next_logits(ids), r = recompute.next_logits(ids);
      test::expect_close(c, test::to_double(r), 1e-4, std::string(quant_type_name(t)) + " step " + std::to_string(step));
      ids.push_back(int32_t(std::max_element(r.begin(), r.end()) - r.begin()));
    }
    // The file stores Q/K/V and gate/up as a mix of Q8_0, Q4_0 and F16, and
    // stored formats stay: nothing merges, 7 products a layer and the head.
    Executable& step = cached.state_fed_executable();
    EXPECT_EQ(step.report().thunk_histogram.at("matmul_q"), 2 * 7 + 1);
    EXPECT_EQ(step.report().thunk_histogram.count("matmul"), 0u);
  }
}

// A Hugging Face directory of float weights (tied embeddings) whose sizes
// are multiples of 32; its weights as the graph names them.
test::Weights write_quantizable_dir(const std::filesystem::path& dir, int64_t ffn) {
  LlamaConfig c = test::odd_config();
  c.vocab_size = 97;
  c.hidden_size = 64;
  c.intermediate_size = int(ffn);
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = c.rope_dims = 16;
  const Graph g = build_llama_graph(c, 1, 1, DType::F32);
  test::Weights w = test::random_weights(g);
  std::map<std::string, std::pair<Shape, std::vector<float>>> tensors;
  for (const Node& n : g.nodes())
    if (n.op == OpKind::Param) tensors[llama_hf_name(n.name)] = {g.value(n.outputs[0]).shape, w.at(n.name)};
  test::write_safetensors(dir / "model.safetensors", tensors);
  test::write_text(dir / "config.json", R"({"model_type": "llama", "vocab_size": 97, "hidden_size": 64,
    "intermediate_size": )" + std::to_string(ffn) + R"(, "num_hidden_layers": 2, "num_attention_heads": 4,
    "num_key_value_heads": 2, "head_dim": 16, "rms_norm_eps": 1e-5, "max_position_embeddings": 64,
    "tie_word_embeddings": true})");
  return w;
}

// Float weights quantized at load (--quantize): every product a matmul_q,
// Q/K/V and gate/up merged into one each, the tied head quantized and the
// embedding gathered from its blocks (gather_q); the logits equal the double
// reference run with those weights quantized and dequantized, after a prompt (the 16-row bucket: dequantized path) and
// after decode steps (one row: the matrix-vector path).
//
// The f32 kernel within 1e-4 of that reference; the default (integer)
// kernel, whose activations are quantized to int8 per block of 32, within
// kInt8Logits of it.
TEST(LlamaQuantized, FloatDirectoryQuantizedAtLoadMatchesTheQuantizedReference) {
  test::TempDir d;
  const test::Weights w = write_quantizable_dir(d.path(), 96);
  constexpr double kInt8Logits = 2e-2;
  for (QuantType t : {QuantType::Q8_0, QuantType::Q4_0, QuantType::Q4_1, QuantType::FP8})
  for (cpu::QuantKernel kernel : {cpu::QuantKernel::F32, cpu::quant_kernel()}) {
    const test::QuantKernelScope scope(kernel);
    GeneratorOptions o;
    o.threads = 1;
    o.quantize = t;
    LlamaGenerator gen(d.path().string(), o);
    EXPECT_EQ(gen.quantized_weights().size(), 2u * 7 + 1);
    EXPECT_EQ(gen.quantized_weights().count("token_embd.weight"), 1u);
    test::Weights ref = w;
    for (const auto& [name, type] : gen.quantized_weights()) {
      const std::vector<float>& v = w.at(name);
      const int64_t k = name.find("ffn_down") != std::string::npos ? 96 : 64;  // rows of [n, k]
      std::vector<float> back(v.size());
      std::vector<uint8_t> q(v.size());
      std::vector<uint16_t> s(v.size() / kQuantBlock);
      for (size_t r = 0; r < v.size() / size_t(k); ++r) {
        quantize_row(type, v.data() + r * size_t(k), k, q.data(), s.data());
        dequantize_row(type, q.data(), s.data(), k, back.data() + r * size_t(k));
      }
      ref[name] = back;  // the tied embedding too: the gather reads the head's blocks
    }
    std::vector<int32_t> ids{3, 14, 15, 92, 65, 35, 8};
    for (int step = 0; step < 4; ++step) {
      const std::vector<float> got = gen.next_logits(ids);
      test::expect_close(got, test::reference(gen.config(), ref, ids, int(ids.size()) - 1),
                         kernel == cpu::QuantKernel::F32 || t == QuantType::FP8 ? 1e-4 : kInt8Logits,
                         std::string(quant_type_name(t)) + " " + cpu::quant_kernel_name(kernel) + " step " +
                             std::to_string(step));
      ids.push_back(int32_t(std::max_element(got.begin(), got.end()) - got.begin()));
    }
    EXPECT_EQ(gen.decode_steps(), 3u);
    Executable& step = gen.state_fed_executable();
    EXPECT_EQ(step.report().thunk_histogram.at("matmul_q"), 2 * 4 + 1);
    EXPECT_EQ(step.report().thunk_histogram.count("matmul"), 0u);
    EXPECT_EQ(step.report().thunk_histogram.at("gather_q"), 1);
  }
  // FFN rows of 80: ffn_down cannot be quantized, and the error names it.
  test::TempDir odd;
  write_quantizable_dir(odd.path(), 80);
  GeneratorOptions o;
  o.quantize = QuantType::Q4_0;
  const std::string e = test::error_of([&] { LlamaGenerator gen(odd.path().string(), o); });
  EXPECT_NE(e.find("'blk.0.ffn_down.weight'"), std::string::npos) << e;
  EXPECT_NE(e.find("multiple of 32"), std::string::npos) << e;
}

// --quantize fp8 against the float model it came from: fed the float
// model's greedy tokens, the FP8 model's logits point the same way and its
// greedy choice is mostly the same, through the prompt and the decode
// steps. The bound is the format's: 3 mantissa bits leave each weight
// within 2^-4 of itself, 2.4% RMS (Q8_0: 0.4% on these uniform weights),
// and through the tied embedding, two layers and the head the logits
// come to a cosine of 0.9989 here. (That they are the FP8 weights'
// product to f32 rounding is FloatDirectoryQuantizedAtLoad... above.)
TEST(LlamaQuantized, Fp8StaysNearTheFloatModel) {
  test::TempDir d;
  write_quantizable_dir(d.path(), 96);
  GeneratorOptions o;
  o.threads = 1;
  LlamaGenerator plain(d.path().string(), o);
  o.quantize = QuantType::FP8;
  LlamaGenerator fp8(d.path().string(), o);
  EXPECT_EQ(fp8.quantized_weights().size(), 2u * 7 + 1);
  for (const auto& [name, type] : fp8.quantized_weights()) EXPECT_EQ(type, QuantType::FP8) << name;
  std::vector<int32_t> ids{3, 14, 15, 92, 65, 35, 8};
  const int steps = 16;
  int same = 0;
  double worst = 1;
  for (int step = 0; step < steps; ++step) {
    const std::vector<float> a = plain.next_logits(ids), b = fp8.next_logits(ids);
    ASSERT_EQ(a.size(), b.size());
    double ab = 0, aa = 0, bb = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_TRUE(std::isfinite(b[i])) << step << " " << i;
      ab += double(a[i]) * b[i];
      aa += double(a[i]) * a[i];
      bb += double(b[i]) * b[i];
    }
    const double cosine = ab / std::sqrt(aa * bb);
    worst = std::min(worst, cosine);
    EXPECT_GE(cosine, 0.998) << "step " << step;
    const int32_t ta = int32_t(std::max_element(a.begin(), a.end()) - a.begin());
    same += ta == int32_t(std::max_element(b.begin(), b.end()) - b.begin());
    ids.push_back(ta);
  }
  EXPECT_GE(same, steps - 2) << "of " << steps << " greedy tokens equal; worst cosine " << worst;
  std::printf("fp8 against f32: %d of %d greedy tokens equal, worst cosine %.6f\n", same, steps, worst);
  EXPECT_EQ(fp8.state_fed_executable().report().thunk_histogram.at("matmul_q"), 2 * 4 + 1);
  EXPECT_EQ(fp8.state_fed_executable().report().thunk_histogram.at("gather_q"), 1);
}

}  // namespace
}  // namespace rlx
