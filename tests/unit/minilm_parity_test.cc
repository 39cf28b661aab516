// all-MiniLM-L6-v2 on the CPU backend against sentence-transformers
// (tests/data/make_minilm_reference.py wrote the reference once).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "models/embedder.h"
#include "rlx/error.h"
#include "models/test_files.h"  // tests/models
#include "test_util.h"  // tests/

namespace rlx {
namespace {

using test::cosine;

TEST(MiniLMParity, CpuMatchesSentenceTransformers) {
  ASSERT_TRUE(test::minilm_present());
  std::ifstream in(std::string(RLX_SOURCE_DIR) + "/tests/data/minilm_reference.json");
  ASSERT_TRUE(in) << "tests/data/minilm_reference.json is missing";
  auto j = nlohmann::json::parse(in);
  std::vector<std::string> texts;
  std::vector<std::vector<float>> want;
  for (const auto& c : j.at("cases")) {
    texts.push_back(c.at("text"));
    want.push_back(c.at("embedding").get<std::vector<float>>());
  }
  ASSERT_GE(texts.size(), 12u);

  EmbedderOptions o;
  o.max_batch = 8;  // 12 texts: two chunks, two buckets
  Embedder e(test::minilm_dir(), o);
  EXPECT_EQ(e.max_len(), j.at("max_seq_length").get<int>());
  EXPECT_TRUE(e.normalizes());
  auto got = e.embed(texts);
  ASSERT_EQ(got.size(), texts.size());
  EXPECT_GE(e.compiled_buckets(), 2u);
  for (size_t i = 0; i < texts.size(); ++i) {
    ASSERT_EQ(got[i].size(), 384u) << texts[i];
    double norm = 0, max_abs = 0;
    for (float x : got[i]) {
      ASSERT_TRUE(std::isfinite(x)) << texts[i];
      norm += double(x) * x;
      max_abs = std::max(max_abs, double(std::fabs(x)));
    }
    EXPECT_GT(max_abs, 0.01) << "all-zero embedding for '" << texts[i] << "'";
    EXPECT_NEAR(norm, 1.0, 1e-5) << texts[i];
    EXPECT_GE(cosine(got[i], want[i]), 0.9999) << "'" << texts[i] << "'";
  }
  // Distinct sentences must not collapse onto one vector.
  EXPECT_LT(cosine(got[0], got[1]), 0.9);

  // Alone, each text gives the same vector as inside a padded batch.
  auto single = e.embed({texts[0]});
  EXPECT_GE(cosine(single[0], got[0]), 0.99999);
  auto single_long = e.embed({texts.back()});
  EXPECT_GE(cosine(single_long[0], want.back()), 0.9999);
}

// f16/bf16 storage (f32 compute on the CPU) stays close to the f32 reference.
TEST(MiniLMParity, ReducedPrecisionStaysClose) {
  ASSERT_TRUE(test::minilm_present());
  std::ifstream in(std::string(RLX_SOURCE_DIR) + "/tests/data/minilm_reference.json");
  ASSERT_TRUE(in);
  auto j = nlohmann::json::parse(in);
  std::vector<std::string> texts;
  std::vector<std::vector<float>> want;
  for (size_t i = 0; i < 3; ++i) {
    texts.push_back(j["cases"][i].at("text"));
    want.push_back(j["cases"][i].at("embedding").get<std::vector<float>>());
  }
  for (auto [dt, min_cos] : {std::pair{DType::F16, 0.999}, std::pair{DType::BF16, 0.99}}) {
    EmbedderOptions o;
    o.dtype = dt;
    Embedder e(test::minilm_dir(), o);
    auto got = e.embed(texts);
    for (size_t i = 0; i < texts.size(); ++i)
      EXPECT_GE(cosine(got[i], want[i]), min_cos) << dtype_name(dt) << " '" << texts[i] << "'";
  }
}

// int8 products (EmbedderOptions::int8_products, --quantize int8), in f32
// and in bf16: every committed sentence's embedding within cosine 0.99 of
// sentence-transformers' f32 one, and not identical to rlx's own f32 one
// (the int8 path ran).
TEST(MiniLMParity, Int8ProductsStayClose) {
  ASSERT_TRUE(test::minilm_present());
  std::ifstream in(std::string(RLX_SOURCE_DIR) + "/tests/data/minilm_reference.json");
  ASSERT_TRUE(in);
  auto j = nlohmann::json::parse(in);
  std::vector<std::string> texts;
  std::vector<std::vector<float>> want;
  for (const auto& c : j.at("cases")) {
    texts.push_back(c.at("text"));
    want.push_back(c.at("embedding").get<std::vector<float>>());
  }
  EmbedderOptions f32_options;
  const auto f32 = Embedder(test::minilm_dir(), f32_options).embed(texts);
  for (DType dt : {DType::F32, DType::BF16}) {
    EmbedderOptions o;
    o.dtype = dt;
    o.int8_products = true;
    o.device = Device::Cpu;
    std::vector<std::vector<float>> got;
    try {
      got = Embedder(test::minilm_dir(), o).embed(texts);
    } catch (const Error& e) {
      if (std::string(e.what()).find("AVX512-VNNI") != std::string::npos) GTEST_SKIP() << e.what();
      throw;
    }
    double worst = 1.0, worst_vs_f32 = 1.0;
    for (size_t i = 0; i < texts.size(); ++i) {
      const double c = cosine(got[i], want[i]);
      EXPECT_GE(c, 0.99) << dtype_name(dt) << " '" << texts[i] << "'";
      worst = std::min(worst, c);
      worst_vs_f32 = std::min(worst_vs_f32, cosine(got[i], f32[i]));
    }
    EXPECT_LT(worst_vs_f32, 0.99999) << dtype_name(dt) << ": as close as f32's own, the int8 path did not run";
    std::printf("MiniLM int8 products (%s): worst cosine %.6f against sentence-transformers, %.6f against rlx f32\n",
                std::string(dtype_name(dt)).c_str(), worst, worst_vs_f32);
  }
}

// A batch size per call: the same vectors, run in buckets of that size.
TEST(MiniLMParity, BatchSizePerCall) {
  ASSERT_TRUE(test::minilm_present());
  std::ifstream in(std::string(RLX_SOURCE_DIR) + "/tests/data/minilm_reference.json");
  ASSERT_TRUE(in);
  auto j = nlohmann::json::parse(in);
  std::vector<std::string> texts;
  std::vector<std::vector<float>> want;
  for (const auto& c : j.at("cases")) {
    texts.push_back(c.at("text"));
    want.push_back(c.at("embedding").get<std::vector<float>>());
  }
  EmbedderOptions o;
  o.threads = 1;
  Embedder e(test::minilm_dir(), o);  // max_batch 32: all 12 texts in one run
  auto got = e.embed(texts, 4);
  ASSERT_EQ(got.size(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i) EXPECT_GE(cosine(got[i], want[i]), 0.9999) << "'" << texts[i] << "'";
  for (const Bucket& b : e.buckets_used()) EXPECT_LE(b.batch, 4) << b.batch << "x" << b.seq;
  EXPECT_GE(e.buckets_used().size(), 3u);  // 12 texts, 4 at a time
  EXPECT_THROW(e.embed(texts, 3), Error);
  EXPECT_THROW(e.embed(texts, 2048), Error);
}

TEST(MiniLMParity, BucketsAreTheLibrarysBuckets) {
  EXPECT_EQ(Embedder::bucket_for(1, 3, 256, 32), (Bucket{1, 16}));
  EXPECT_EQ(Embedder::bucket_for(3, 17, 256, 32), (Bucket{4, 32}));
  EXPECT_EQ(Embedder::bucket_for(33, 129, 256, 32), (Bucket{32, 160}));
  EXPECT_EQ(Embedder::bucket_for(7, 300, 310, 32), (Bucket{8, 310}));  // capped at the limit
  EXPECT_THROW(Embedder::bucket_for(1, 400, 384, 32), Error);
}

}  // namespace
}  // namespace rlx
