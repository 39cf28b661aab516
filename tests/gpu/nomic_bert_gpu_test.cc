// NomicBERT on the GPU in f32, f16 and bf16: embeddings of a random model
// of odd sizes (rotary halves and interleaved, with and without biases)
// against the double-precision forward of tests/models/tiny_nomic.h.
#include <gtest/gtest.h>

#include <cmath>

#include "models/embedder.h"
#include "models/tiny_nomic.h"  // tests/models

namespace rlx {
namespace {

using test::TinyBert;
using test::TinyNomic;

const std::vector<std::vector<int>> kWords = {{3}, {0, 7, 11, 2, 19, 4, 4}, {22, 1}, {}, {5, 6, 8, 9, 10, 12, 13, 14, 15, 16, 17}};

double cosine(const std::vector<float>& a, const std::vector<double>& b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ab += a[i] * b[i];
    aa += double(a[i]) * a[i];
    bb += b[i] * b[i];
  }
  return ab / std::sqrt(std::max(aa * bb, 1e-300));
}

TEST(GpuNomicBert, EmbeddingsMatchTheReference) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device present: GPU tests skipped";
  for (const bool interleaved : {false, true}) {
    test::TempDir d;
    test::TinyNomicSpec s;
    s.interleaved = interleaved;
    s.biases = interleaved;
    TinyNomic m(s);
    m.write(d.path());
    test::write_sentence_modules(d.path(), "mean", true);
    std::vector<std::string> texts;
    for (const auto& w : kWords) texts.push_back(TinyBert::text_of(w));
    for (const DType dt : {DType::F32, DType::F16, DType::BF16}) {
      EmbedderOptions o;
      o.device = Device::Cuda;
      o.dtype = dt;
      o.max_batch = 4;
      Embedder e(d.path().string(), o);
      auto got = e.embed(texts);
      ASSERT_EQ(got.size(), texts.size());
      for (size_t i = 0; i < texts.size(); ++i) {
        const auto x = m.hidden(m.ids_of(kWords[i]));
        std::vector<double> want(x[0].size(), 0.0);
        for (const auto& r : x)
          for (size_t k = 0; k < r.size(); ++k) want[k] += r[k];
        for (float v : got[i]) ASSERT_TRUE(std::isfinite(v)) << "row " << i;
        EXPECT_GE(cosine(got[i], want), dt == DType::F32 ? 0.9999 : 0.999)
            << (interleaved ? "interleaved" : "halves") << " dtype " << int(dt) << " row " << i;
      }
    }
  }
}

}  // namespace
}  // namespace rlx
