// Embeddings left on the GPU (Embedder::embed_on_device, what the Python
// package hands torch through DLPack): the device rows, copied back here,
// equal embed()'s host rows in input order for texts of mixed lengths (the
// chunks are sorted by length, so the rows are scattered back), with
// truncate_dim, forced normalisation and several chunks; the buffer starts
// as NaN, so a row nothing wrote fails. Host pooling is refused by name.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>

#include "models/embedder.h"
#include "models/tiny_bert.h"  // tests/models

namespace rlx {
namespace {

using test::TinyBert;

std::vector<float> to_host(const DeviceEmbeddings& d) {
  std::vector<float> h(d.rows * d.dim);
  EXPECT_EQ(cudaMemcpy(h.data(), d.data.get(), h.size() * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  return h;
}

std::vector<std::string> mixed_texts() {
  std::vector<std::string> t;
  for (int i = 0; i < 21; ++i) {
    std::vector<int> w;
    for (int k = 0; k < (i * 7) % 17; ++k) w.push_back((i + 3 * k) % 23);
    t.push_back(TinyBert::text_of(w));
  }
  return t;
}

void expect_same_rows(const DeviceEmbeddings& d, const std::vector<std::vector<float>>& want, double tol,
                      const std::string& what) {
  ASSERT_EQ(d.rows, want.size()) << what;
  ASSERT_TRUE(d.data) << what;
  EXPECT_GE(d.device, 0) << what;
  cudaPointerAttributes attr{};
  ASSERT_EQ(cudaPointerGetAttributes(&attr, d.data.get()), cudaSuccess);
  EXPECT_EQ(attr.type, cudaMemoryTypeDevice) << what;
  const std::vector<float> h = to_host(d);
  for (size_t r = 0; r < d.rows; ++r) {
    ASSERT_EQ(want[r].size(), d.dim) << what;
    double mag = 0;
    for (size_t c = 0; c < d.dim; ++c) {
      const float x = h[r * d.dim + c];
      ASSERT_TRUE(std::isfinite(x)) << what << " row " << r << " col " << c << " was not written";
      EXPECT_NEAR(x, want[r][c], tol) << what << " row " << r << " col " << c;
      mag = std::max(mag, std::fabs(double(x)));
    }
    EXPECT_GT(mag, 1e-3) << what << " row " << r << " is all zeros";
  }
}

TEST(GpuEmbedderDevice, RowsEqualTheHostRowsInInputOrder) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device present: GPU tests skipped";
  for (DType dt : {DType::F32, DType::F16}) {
    for (const std::string mode : {"mean", "cls"}) {
      test::TempDir d;
      TinyBert m({});
      m.write(d.path());
      test::write_sentence_modules(d.path(), mode, true);
      EmbedderOptions o;
      o.device = Device::Cuda;
      o.dtype = dt;
      o.max_batch = 4;  // 21 texts: 6 chunks
      const double tol = dt == DType::F32 ? 1e-5 : 2e-3;
      const std::string what = mode + (dt == DType::F32 ? " f32" : " f16");
      {
        Embedder e(d.path().string(), o);
        const auto texts = mixed_texts();
        expect_same_rows(e.embed_on_device(texts), e.embed(texts), tol, what);
        EXPECT_FALSE(e.embed_on_device({}).data);
      }
      o.truncate_dim = 7;
      Embedder cut(d.path().string(), o);
      expect_same_rows(cut.embed_on_device(mixed_texts()), cut.embed(mixed_texts()), tol, what + " truncate_dim 7");
    }
  }
  // No Normalize module: raw vectors, or normalised when asked.
  test::TempDir d;
  TinyBert m({});
  m.write(d.path());
  test::write_sentence_modules(d.path(), "mean", false);
  EmbedderOptions o;
  o.device = Device::Cuda;
  Embedder e(d.path().string(), o);
  const auto texts = mixed_texts();
  auto raw = e.embed(texts);
  expect_same_rows(e.embed_on_device(texts), raw, 1e-5, "no Normalize");
  for (auto& v : raw) l2_normalize(v);
  expect_same_rows(e.embed_on_device(texts, {}, true), raw, 1e-5, "normalize asked");
}

TEST(GpuEmbedderDevice, HostPoolingIsRefusedByName) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device present: GPU tests skipped";
  test::TempDir d;
  TinyBert m({});
  m.write(d.path());
  test::write_sentence_modules(d.path(), "max", true);
  EmbedderOptions o;
  o.device = Device::Cuda;
  Embedder e(d.path().string(), o);
  std::string msg = test::error_of([&] { e.embed_on_device({"a"}); });
  EXPECT_NE(msg.find("pooling runs in the graph"), std::string::npos) << msg;
}

}  // namespace
}  // namespace rlx
