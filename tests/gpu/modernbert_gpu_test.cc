// ModernBERT on the GPU in f32, f16 and bf16, per op and recorded: the
// random models of tests/data/modernbert against sentence-transformers'
// embeddings (texts longer than the local layers' window, in padded
// batches) and the cross-encoder's scores.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "models/embedder.h"
#include "test_util.h"  // tests/

namespace rlx {
namespace {

using test::cosine;

const std::string kData = std::string(RLX_SOURCE_DIR) + "/tests/data/modernbert";

// RLX_EXEC for the executables compiled while it lives (the embedder asks for auto).
struct ExecEnv {
  explicit ExecEnv(const char* mode) { setenv("RLX_EXEC", mode, 1); }
  ~ExecEnv() { unsetenv("RLX_EXEC"); }
};

TEST(GpuModernBert, EmbeddingsAndScoresMatchSentenceTransformers) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device present: GPU tests skipped";
  std::ifstream in(kData + "/reference.json");
  ASSERT_TRUE(in);
  const auto ref = nlohmann::json::parse(in);
  std::vector<std::string> texts;
  std::vector<std::vector<float>> want;
  for (const auto& c : ref.at("texts")) {
    texts.push_back(c.at("text"));
    want.push_back(c.at("embedding").get<std::vector<float>>());
  }
  for (const char* mode : {"perop", "graph"}) {
    ExecEnv env(mode);
    for (const DType dt : {DType::F32, DType::F16, DType::BF16}) {
      EmbedderOptions o;
      o.device = Device::Cuda;
      o.dtype = dt;
      o.max_batch = 4;
      Embedder e(kData + "/embed", o);
      auto got = e.embed(texts);
      ASSERT_EQ(got.size(), texts.size());
      for (size_t i = 0; i < texts.size(); ++i) {
        for (float x : got[i]) ASSERT_TRUE(std::isfinite(x)) << mode << " row " << i;
        EXPECT_GE(cosine(got[i], want[i]), dt == DType::F32 ? 0.9999 : 0.999)
            << mode << " dtype " << int(dt) << " '" << texts[i] << "'";
      }
      o.max_batch = 32;
      Embedder ce(kData + "/rerank", o);
      for (const auto& p : ref.at("pairs")) {
        const float s = ce.score(p.at("query").get<std::string>(), {p.at("passage").get<std::string>()})[0];
        EXPECT_NEAR(s, p.at("score").get<double>(), dt == DType::F32 ? 1e-4 : 2e-2)
            << mode << " dtype " << int(dt) << " " << p.at("query");
      }
    }
  }
}

}  // namespace
}  // namespace rlx
