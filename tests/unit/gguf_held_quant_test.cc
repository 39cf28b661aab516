// GGUF K-quant and 5-bit tensors held in rlx's block formats
// (gguf_held_quant.h): the block conversions against the `gguf` package's
// values of tests/data/gguf_cases.gguf (Q5_0 exactly, Q4_K within its f16
// scale rounding), and a decoder GGUF whose products are stored as Q4_K,
// Q5_0, Q5_1, Q5_K and Q6_K generating from the held weights: every product
// a matmul_q of the held format, the logits those weights give.
#include "models/gguf_held_quant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "cpu_quant_kernel_scope.h"
#include "models/decoder_family_files.h"  // tests/models
#include "models/llama_generator.h"
#include "models/llama_quant.h"
#include "thunks/quant_math.h"

namespace rlx {
namespace {

const std::string kCases = std::string(RLX_SOURCE_DIR) + "/tests/data/gguf_cases.gguf";

std::vector<float> dequantized(GgmlType t, std::span<const uint8_t> blocks, uint64_t n) {
  std::vector<float> v(n);
  dequantize(t, blocks.data(), v.data(), n);
  return v;
}

TEST(GgufHeldQuant, FormatsTheTypesAreHeldIn) {
  EXPECT_TRUE(held_quant_type(GgmlType::Q8_0) == QuantType::Q8_0);
  EXPECT_TRUE(held_quant_type(GgmlType::Q4_0) == QuantType::Q4_0);
  EXPECT_TRUE(held_quant_type(GgmlType::Q4_1) == QuantType::Q4_1);
  EXPECT_TRUE(held_quant_type(GgmlType::Q4_K) == QuantType::Q4_1);
  for (GgmlType t : {GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q5_K, GgmlType::Q6_K})
    EXPECT_TRUE(held_quant_type(t) == QuantType::Q8_0) << ggml_type_name(t);
  for (GgmlType t : {GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::F16, GgmlType::F32})
    EXPECT_FALSE(held_quant_type(t)) << ggml_type_name(t);
  const std::string e = test::error_of([] { held_blocks(GgmlType::Q4_K, std::vector<uint8_t>(143)); });
  EXPECT_NE(e.find("Q4_K"), std::string::npos) << e;
}

// Q5_0's values are Q8_0's: the same scale, q - 16 as a byte.
TEST(GgufHeldQuant, Q5_0IsHeldAsQ8_0Exactly) {
  GgufFile f(kCases);
  const GgufTensorInfo& q = f.tensor("q.Q5_0");
  const std::vector<uint8_t> held = held_blocks(GgmlType::Q5_0, f.bytes(q.name));
  const std::vector<float> got = dequantized(GgmlType::Q8_0, held, q.numel), want = f.to_f32("ref.Q5_0");
  ASSERT_EQ(got.size(), want.size());
  size_t nonzero = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i], want[i]) << i;
    nonzero += want[i] != 0.f;
  }
  EXPECT_GT(nonzero, got.size() / 2);
}

// Q4_K's sub-blocks as Q4_1 blocks: the same nibbles; scale d * sc and
// minimum dmin * m rounded to f16 move a value by at most 15 times the
// scale's rounding plus the minimum's.
TEST(GgufHeldQuant, Q4_KIsHeldAsQ4_1WithinItsScaleRounding) {
  GgufFile f(kCases);
  const GgufTensorInfo& q = f.tensor("q.Q4_K");
  const std::span<const uint8_t> blocks = f.bytes(q.name);
  const std::vector<uint8_t> held = held_blocks(GgmlType::Q4_K, blocks);
  ASSERT_EQ(held.size(), q.numel / 32 * 20);
  const std::vector<float> got = dequantized(GgmlType::Q4_1, held, q.numel), want = f.to_f32("ref.Q4_K");
  ASSERT_EQ(got.size(), want.size());
  size_t exact = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const uint8_t* sb = blocks.data() + (i / 256) * 144;
    uint16_t dh, mh;
    std::memcpy(&dh, sb, 2);
    std::memcpy(&mh, sb + 2, 2);
    uint8_t sc, m;
    ggml_scale_min_k4(int(i % 256 / 32), sb + 4, sc, m);
    const double d1 = double(half_to_float(dh)) * sc, m1 = double(half_to_float(mh)) * m;
    const double bound = (15 * std::fabs(d1) + std::fabs(m1)) * std::ldexp(1.0, -11) * 1.01 + 1e-7 * std::fabs(want[i]);
    ASSERT_LE(std::fabs(double(got[i]) - want[i]), bound) << "element " << i;
    exact += got[i] == want[i];
  }
  EXPECT_LT(exact, got.size());  // the rounding shows: the check is not vacuous
}

// A Qwen2-shaped decoder (no row permutation in its GGUF) whose products'
// rows are multiples of 256, stored in five formats.
struct HeldModel {
  test::Family f = test::qwen2();
  test::Weights file;  // the file's values
  test::Weights held;  // the values rlx holds
  std::map<std::string, test::GgufBlocks> blocks;
  std::map<std::string, QuantType> want;
};

// Random blocks of t (random bytes, each f16 scale field small and finite).
std::string random_blocks(GgmlType t, uint64_t elements, uint64_t seed) {
  uint64_t be = 0, bb = 0;
  EXPECT_TRUE(ggml_type_layout(t, be, bb));
  std::vector<size_t> fields = t == GgmlType::Q6_K                                  ? std::vector<size_t>{208}
                               : t == GgmlType::Q5_0                                ? std::vector<size_t>{0}
                                                                                    : std::vector<size_t>{0, 2};
  const std::vector<float> r = test::random_floats(size_t(elements / be * bb), seed, 0.f, 256.f);
  std::string bytes(r.size(), '\0');
  for (size_t i = 0; i < r.size(); ++i) bytes[i] = char(uint8_t(r[i]));
  const std::vector<float> s = test::random_floats(size_t(elements / be * 2), seed + 1, 0.5f, 1.f);
  const float unit = be == 256 ? 2e-4f : 4e-3f;  // K-quants multiply 6-bit scales
  for (uint64_t b = 0; b < elements / be; ++b)
    for (size_t k = 0; k < fields.size(); ++k) {
      const uint16_t h = float_to_half(unit * s[size_t(2 * b + k)]);
      std::memcpy(&bytes[size_t(b * bb + fields[k])], &h, 2);
    }
  return bytes;
}

HeldModel held_model() {
  HeldModel m;
  LlamaConfig& c = m.f.cfg;
  c.hidden_size = 256;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = c.rope_dims = 64;
  c.intermediate_size = 512;
  m.file = test::weights_of(c);
  const GgmlType types[] = {GgmlType::Q4_K, GgmlType::Q5_0, GgmlType::Q6_K, GgmlType::Q5_K, GgmlType::Q5_1};
  uint64_t seed = 900, i = 0;
  for (const auto& [name, shape] : llama_matmul_weights(c)) {
    const GgmlType t = types[i++ % 5];
    const uint64_t n = uint64_t(numel(shape));
    std::string bytes = random_blocks(t, n, seed += 10);
    const auto* b = reinterpret_cast<const uint8_t*>(bytes.data());
    m.file[name] = dequantized(t, {b, bytes.size()}, n);
    const QuantType h = *held_quant_type(t);
    std::vector<float>& v = m.held[name];
    if (held_from_blocks(t)) {
      v = dequantized(h == QuantType::Q8_0 ? GgmlType::Q8_0 : GgmlType::Q4_1, held_blocks(t, {b, bytes.size()}), n);
    } else {  // requantized as llama.cpp's Q8_0 rounds
      v.resize(n);
      std::vector<uint8_t> q(32);
      uint16_t d;
      for (uint64_t j = 0; j < n; j += 32) {
        quantize_row(QuantType::Q8_0, m.file[name].data() + j, 32, q.data(), &d);
        dequantize_row(QuantType::Q8_0, q.data(), &d, 32, v.data() + j);
      }
    }
    m.blocks[name] = {uint32_t(t), std::move(bytes)};
    m.want[name] = h;
  }
  for (const auto& [name, v] : m.file)
    if (!m.held.count(name)) m.held[name] = v;
  return m;
}

TEST(GgufHeldQuant, DecoderStoredInKQuantsGeneratesFromTheHeldWeights) {
  const HeldModel m = held_model();
  test::TempDir d;
  const std::string path = (d.path() / "m.gguf").string();
  test::write_gguf(path, m.f, m.file, nullptr, m.blocks);
  const std::vector<int32_t> ids = test::random_ids(9, m.f.cfg.vocab_size, 31);
  GeneratorOptions o;
  o.threads = 1;
  {
    LlamaGenerator gen(path, o);
    EXPECT_EQ(gen.quantized_weights(), m.want);
    // Every product on the held blocks (products of one format may merge).
    const auto& h = gen.state_fed_executable().report().thunk_histogram;
    EXPECT_GE(h.at("matmul_q"), 2 * 4 + 1);
    EXPECT_EQ(h.count("matmul"), 0u);
    // The integer kernels' two-digit activations: as the quantized-at-load test allows.
    std::vector<int32_t> prefix(ids.begin(), ids.begin() + 6);
    for (int step = 0; step < 3; ++step) {
      const std::vector<float> got = gen.next_logits(prefix);
      test::expect_close(got, test::reference(m.f.cfg, m.held, prefix, int(prefix.size()) - 1), 2e-2,
                         "held weights, step " + std::to_string(step));
      // The file's own values: within what holding them moved.
      test::expect_close(got, test::reference(m.f.cfg, m.file, prefix, int(prefix.size()) - 1), 4e-2,
                         "file weights, step " + std::to_string(step));
      prefix.push_back(ids[prefix.size()]);
    }
  }
  // The f32 kernel: Q4_1 is then not kept (the floats read faster), so Q4_K
  // is expanded from the file exactly; the Q8_0-held weights are dequantized.
  const test::QuantKernelScope f32(cpu::QuantKernel::F32);
  LlamaGenerator gen(path, o);
  test::Weights mixed = m.held;
  for (const auto& [name, b] : m.blocks)
    if (GgmlType(b.type) == GgmlType::Q4_K) mixed[name] = m.file.at(name);
  EXPECT_EQ(gen.quantized_weights().size(), m.want.size() - 3);  // 3 of the 15 products are Q4_K
  const std::vector<int32_t> prefix(ids.begin(), ids.begin() + 7);
  test::expect_close(gen.next_logits(prefix), test::reference(m.f.cfg, mixed, prefix, 6), 1e-4, "f32 kernel");
}

}  // namespace
}  // namespace rlx
