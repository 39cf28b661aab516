// Decoder embedders on the GPU in f32, f16 and bf16, per op and recorded:
// the random Qwen3 and Qwen2 of tests/data/qwen3_embed and qwen2_embed
// (last-token pooling, the "query" prompt, mean pooling over every row's
// hidden state) against their float64 reference in padded batches, and the
// last-token vectors left on the device.
#include <cuda_runtime.h>
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

// RLX_EXEC for the executables compiled while it lives (the embedder asks for auto).
struct ExecEnv {
  explicit ExecEnv(const char* mode) { setenv("RLX_EXEC", mode, 1); }
  ~ExecEnv() { unsetenv("RLX_EXEC"); }
};

TEST(GpuDecoderEmbedder, Qwen3AndQwen2MatchTheReference) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device present: GPU tests skipped";
  for (const char* family : {"qwen3", "qwen2"}) {
    const std::string dir = std::string(RLX_SOURCE_DIR) + "/tests/data/" + family + "_embed";
    std::ifstream in(dir + "/reference.json");
    ASSERT_TRUE(in) << dir;
    const auto ref = nlohmann::json::parse(in);
    std::vector<std::string> texts;
    std::vector<std::vector<float>> last, query, mean;
    for (const auto& c : ref.at("texts")) {
      texts.push_back(c.at("text"));
      last.push_back(c.at("embedding").get<std::vector<float>>());
      query.push_back(c.at("query_embedding").get<std::vector<float>>());
      mean.push_back(c.at("mean_embedding").get<std::vector<float>>());
    }
    for (const char* mode : {"perop", "graph"}) {
      ExecEnv env(mode);
      for (const DType dt : {DType::F32, DType::F16, DType::BF16}) {
        const double limit = dt == DType::F32 ? 0.9999 : 0.999;
        auto check = [&](const std::vector<std::vector<float>>& got, const std::vector<std::vector<float>>& want,
                         const char* what) {
          ASSERT_EQ(got.size(), want.size());
          for (size_t i = 0; i < got.size(); ++i) {
            for (float x : got[i]) ASSERT_TRUE(std::isfinite(x)) << family << " " << mode << " row " << i;
            EXPECT_GE(cosine(got[i], want[i]), limit)
                << family << " " << what << " " << mode << " dtype " << int(dt) << " '" << texts[i] << "'";
          }
        };
        EmbedderOptions o;
        o.device = Device::Cuda;
        o.dtype = dt;
        o.max_batch = 4;
        Embedder e(dir, o);
        check(e.embed(texts), last, "lasttoken");
        EmbedCall q;
        q.prompt_name = "query";
        check(e.embed(texts, q), query, "query");
        // The same vectors left on the device: pooled by the graph's
        // last_index rows, normalised there.
        DeviceEmbeddings d = e.embed_on_device(texts);
        ASSERT_EQ(d.rows, texts.size());
        ASSERT_EQ(d.dim, last[0].size());
        std::vector<float> host(d.rows * d.dim);
        ASSERT_EQ(cudaMemcpy(host.data(), d.data.get(), host.size() * sizeof(float), cudaMemcpyDeviceToHost),
                  cudaSuccess);
        std::vector<std::vector<float>> rows;
        for (size_t r = 0; r < d.rows; ++r) rows.emplace_back(host.begin() + long(r * d.dim), host.begin() + long((r + 1) * d.dim));
        check(rows, last, "on device");
        o.pooling = PoolingMode::Mean;
        Embedder m(dir, o);
        check(m.embed(texts), mean, "mean");
      }
    }
  }
}

}  // namespace
}  // namespace rlx
