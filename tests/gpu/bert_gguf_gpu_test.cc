// BERT and NomicBERT embedders from GGUF files on the GPU in f32, f16 and
// bf16 (tests/data/bert_gguf): against sentence-transformers' vectors (BERT)
// and the float64 forward (NomicBERT) the fixture holds, per op and recorded.
#include <gtest/gtest.h>

#include <cmath>

#include "models/bert_gguf_fixture.h"  // tests/models
#include "models/embedder.h"

namespace rlx {
namespace {

TEST(GpuBertGguf, EmbeddingsMatchTheReference) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device present: GPU tests skipped";
  const std::vector<test::Case> cases = test::reference();
  ASSERT_GE(cases.size(), 7u);
  for (const bool nomic : {false, true})
    for (const DType dt : {DType::F32, DType::F16, DType::BF16}) {
      SCOPED_TRACE(std::string(nomic ? "nomic-bert" : "bert") + " " + std::string(dtype_name(dt)));
      EmbedderOptions o;
      o.device = Device::Cuda;
      o.dtype = dt;
      o.max_batch = 4;
      o.max_len = 64;  // the references cut the long text there
      Embedder e(nomic ? test::kNomic : test::kF32, o);
      const auto got = e.embed(test::texts_of(cases));
      ASSERT_EQ(got.size(), cases.size());
      for (size_t i = 0; i < cases.size(); ++i) {
        const std::vector<float>& want = nomic ? cases[i].nomic : cases[i].embedding;
        ASSERT_EQ(got[i].size(), want.size()) << "text " << i;
        for (float v : got[i]) ASSERT_TRUE(std::isfinite(v)) << "text " << i;
        EXPECT_GE(test::cosine(got[i], want), dt == DType::F32 ? 0.9999 : 0.999) << "text " << i;
        if (dt == DType::F32) EXPECT_LE(test::max_diff(got[i], want), 1e-4) << "text " << i;
      }
    }
}

}  // namespace
}  // namespace rlx
