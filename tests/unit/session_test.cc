// End to end through compile(): lowering, views, output copies, bindings,
// and every bad-input case of the Session API.
#include <gtest/gtest.h>

#include "compile/plan_verify.h"
#include "rlx/session.h"
#include "test_util.h"
#include "thunks/thunk.h"

using namespace rlx;
using namespace rlx::test;

namespace {


CompileOptions cpu(bool fuse = true) {
  CompileOptions o;
  o.device = Device::Cpu;
  o.fuse = fuse;
  return o;
}

}  // namespace

// x[2,7,33] -> permute -> narrow (strided) -> reshape (view) -> concat -> cast,
// with a batched matmul broadcasting a 2-D weight and an input copied out.
TEST(Session, LoweringOfViewsCopiesAndBatchedMatmul) {
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    Graph g;
    ValueId x = g.input("x", {2, 7, 33}, dt);
    ValueId w = g.param("w", {33, 5}, dt);
    ValueId p = g.permute(x, {1, 0, 2});                  // [7, 2, 33]
    ValueId n = g.narrow(p, 2, 4, 9);                      // strided: [7, 2, 9]
    ValueId r = g.reshape(n, {14, 9});                     // view
    ValueId c = g.concat({r, g.narrow(r, 0, 3, 5)}, 0);    // contiguous narrow is a view: [19, 9]
    ValueId y = g.matmul(x, w);                            // [2, 7, 5]
    g.output("c", g.cast(c, DType::F32));
    g.output("y", y);
    g.output("x_again", x);
    auto exe = compile(g, cpu());
    verify_plan(exe->schedule());

    auto xv = quantize(random_floats(2 * 7 * 33, 11), dt);
    auto wv = quantize(random_floats(33 * 5, 12), dt);
    exe->set_param("w", HostTensor::from_f32({33, 5}, wv, DType::F32));  // converted to dt
    auto out = exe->run({{"x", HostTensor::from_f32({2, 7, 33}, xv, dt)}});

    std::vector<double> ref_c, ref_y(2 * 7 * 5, 0.0);
    auto at = [&](int i, int b, int k) { return double(xv[size_t((b * 7 + i) * 33 + k)]); };
    for (int i = 0; i < 7; ++i)
      for (int b = 0; b < 2; ++b)
        for (int k = 0; k < 9; ++k) ref_c.push_back(at(i, b, 4 + k));
    for (size_t i = 3 * 9; i < 8 * 9; ++i) ref_c.push_back(ref_c[i]);
    for (int b = 0; b < 2; ++b)
      for (int i = 0; i < 7; ++i)
        for (int j = 0; j < 5; ++j)
          for (int k = 0; k < 33; ++k)
            ref_y[size_t((b * 7 + i) * 5 + j)] += double(xv[size_t((b * 7 + i) * 33 + k)]) * wv[size_t(k * 5 + j)];
    std::string tag = std::string(dtype_name(dt));
    EXPECT_EQ(out["c"].dtype, DType::F32);
    expect_close(out["c"].to_f32(), ref_c, 0, "views and copies " + tag);
    expect_close(out["y"].to_f32(), ref_y, tolerance(dt) * 4, "batched matmul " + tag);
    expect_close(out["x_again"].to_f32(), to_double(xv), 0, "input copied to output " + tag);
  }
}

TEST(Session, ReusesScratchAcrossAChain) {
  Graph g;
  ValueId x = g.input("x", {64, 64}, DType::F32);
  for (int i = 0; i < 20; ++i) x = g.tanh(g.add(x, x));
  g.output("y", x);
  auto exe = compile(g, cpu());
  verify_plan(exe->schedule());
  const auto& r = exe->report();
  EXPECT_EQ(r.thunk_count, 40u);
  // A chain needs at most three live 16 KiB slots at once, not forty.
  EXPECT_LE(r.peak_live_bytes, 3u * 64 * 64 * 4);
  EXPECT_LT(exe->schedule().scratch.size, r.intermediate_bytes / 5);
  std::vector<float> xv = random_floats(64 * 64, 3, -0.2f, 0.2f);
  auto out = exe->run({{"x", HostTensor::from_f32({64, 64}, xv)}});
  std::vector<double> ref(xv.begin(), xv.end());
  for (int i = 0; i < 20; ++i)
    for (double& v : ref) v = std::tanh(2 * v);
  expect_close(out["y"].to_f32(), ref, 1e-5, "chain");
}

TEST(Session, BadInputsGiveClearErrors) {
  Graph g;
  ValueId ids = g.input("ids", {2, 3}, DType::I32);
  ValueId emb = g.param("emb", {10, 4}, DType::F16);
  ValueId x = g.input("x", {2, 3, 4}, DType::F16);
  g.output("y", g.add(g.gather(emb, ids), x));
  auto exe = compile(g, cpu());
  auto good_ids = HostTensor::from_i32({2, 3}, {0, 1, 2, 3, 4, 9});
  auto good_x = HostTensor::from_f32({2, 3, 4}, random_floats(24, 1), DType::F16);

  EXPECT_NE(error_of([&] { exe->run({{"ids", good_ids}, {"x", good_x}}); }).find("param 'emb' was never set"),
            std::string::npos);
  EXPECT_NE(error_of([&] { exe->set_param("embedding", HostTensor::from_f32({10, 4}, random_floats(40, 2))); })
                .find("no param named 'embedding' (params: emb)"),
            std::string::npos);
  EXPECT_NE(error_of([&] { exe->set_param("emb", HostTensor::from_f32({4, 10}, random_floats(40, 2))); })
                .find("shape [4, 10] does not match the param's [10, 4]"),
            std::string::npos);
  EXPECT_NE(error_of([&] { exe->set_param("emb", HostTensor::from_i32({10, 4}, std::vector<int32_t>(40))); })
                .find("cannot convert i32 to f16"),
            std::string::npos);
  std::vector<float> e = random_floats(40, 2);
  EXPECT_NE(error_of([&] { exe->set_param_f32("emb", e.data(), 39); }).find("39 values"), std::string::npos);
  exe->set_param_f32("emb", e.data(), 40);

  EXPECT_NE(error_of([&] { exe->run({{"ids", good_ids}}); }).find("input 'x' is missing"), std::string::npos);
  EXPECT_NE(error_of([&] { exe->run({{"ids", good_ids}, {"x", good_x}, {"z", good_x}}); })
                .find("no input named 'z'"),
            std::string::npos);
  EXPECT_NE(error_of([&] { exe->run({{"ids", good_ids}, {"x", HostTensor::from_f32({2, 3, 4}, random_floats(24, 1))}}); })
                .find("input 'x' is f32, expected f16"),
            std::string::npos);
  EXPECT_NE(error_of([&] { exe->run({{"ids", HostTensor::from_i32({3, 2}, {0, 1, 2, 3, 4, 5})}, {"x", good_x}}); })
                .find("input 'ids' has shape [3, 2], expected [2, 3]"),
            std::string::npos);
  std::string oor = error_of([&] {
    exe->run({{"ids", HostTensor::from_i32({2, 3}, {0, 1, 2, 3, 10, 0})}, {"x", good_x}});
  });
  EXPECT_NE(oor.find("'ids' [4] = 10 is out of range [0, 10)"), std::string::npos) << oor;
  EXPECT_NE(error_of([&] { exe->run({{"ids", HostTensor::from_i32({2, 3}, {0, -1, 2, 3, 4, 0})}, {"x", good_x}}); })
                .find("= -1 is out of range"),
            std::string::npos);

  auto out = exe->run({{"ids", good_ids}, {"x", good_x}});
  auto xs = good_x.to_f32();
  auto ev = quantize(e, DType::F16);
  std::vector<double> ref;
  std::vector<int32_t> idv = good_ids.to_i32();
  for (int t = 0; t < 6; ++t)
    for (int c = 0; c < 4; ++c) ref.push_back(double(ev[size_t(idv[size_t(t)] * 4 + c)]) + xs[size_t(t * 4 + c)]);
  expect_close(out["y"].to_f32(), ref, tolerance(DType::F16), "gather + add");
}

TEST(Session, CompileErrors) {
  Graph g;
  g.input("x", {2}, DType::F32);
  EXPECT_NE(error_of([&] { compile(g, cpu()); }).find("no outputs"), std::string::npos);
#ifndef RLX_HAVE_CUDA
  Graph h;
  h.output("y", h.relu(h.input("x", {2}, DType::F32)));
  CompileOptions o;
  o.device = Device::Cuda;
  EXPECT_NE(error_of([&] { compile(h, o); }).find("no CUDA device"), std::string::npos);
#endif
}

TEST(Session, PipelinedRunsEqualSequentialRuns) {
  Graph g;
  ValueId x = g.input("x", {5, 9}, DType::F32);
  g.output("y", g.softmax(g.matmul(x, g.param("w", {9, 9}, DType::F32))));
  auto exe = compile(g, cpu());
  auto w = random_floats(81, 5);
  exe->set_param_f32("w", w.data(), w.size());
  std::vector<std::map<std::string, HostTensor>> batches;
  for (int i = 0; i < 10; ++i) batches.push_back({{"x", HostTensor::from_f32({5, 9}, random_floats(45, 100 + i))}});
  auto piped = exe->run_pipelined(batches);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(piped[size_t(i)]["y"].bytes, exe->run(batches[size_t(i)])["y"].bytes);
}
