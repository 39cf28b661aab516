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

namespace {

// The same builder at two sequence lengths: identical params, other shapes.
Graph seq_graph(int64_t seq) {
  Graph g;
  ValueId x = g.input("x", {2, seq, 12}, DType::F32);
  std::vector<float> ramp(static_cast<size_t>(seq));
  for (int64_t i = 0; i < seq; ++i) ramp[size_t(i)] = 0.1f * float(i);
  ValueId bias = g.reshape(g.constant_f32({seq}, DType::F32, ramp, "ramp"), {seq, 1});
  ValueId h = g.add(g.linear(x, g.param("w", {12, 12}, DType::F32), g.param("b", {12}, DType::F32),
                             Activation::Tanh),
                    bias);
  g.output("y", h);
  return g;
}

std::vector<double> seq_reference(const std::vector<float>& x, const std::vector<float>& w,
                                  const std::vector<float>& b, int64_t seq) {
  std::vector<double> y;
  for (int64_t r = 0; r < 2 * seq; ++r)
    for (int j = 0; j < 12; ++j) {
      double acc = b[size_t(j)];
      for (int k = 0; k < 12; ++k) acc += double(x[size_t(r * 12 + k)]) * w[size_t(j * 12 + k)];
      y.push_back(std::tanh(acc) + 0.1 * double(r % seq));
    }
  return y;
}

}  // namespace

TEST(Session, ExecutablesShareOneArenaAndItsParams) {
  CompileOptions o = cpu();
  o.arena_share = make_arena_share(planned_arena_bytes(seq_graph(29), o));
  auto small = compile(seq_graph(5), o);
  auto large = compile(seq_graph(29), o);
  auto w = random_floats(144, 1), b = random_floats(12, 2);
  small->set_param_f32("w", w.data(), w.size());
  small->set_param_f32("b", b.data(), b.size());
  large->share_params_with(*small);
  // Interleaved runs: each puts its own constants back before it runs.
  for (int round = 0; round < 2; ++round)
    for (int64_t seq : {29, 5}) {
      auto& exe = seq == 5 ? *small : *large;
      auto x = random_floats(size_t(2 * seq * 12), 10 + uint64_t(seq) + uint64_t(round));
      auto out = exe.run({{"x", HostTensor::from_f32({2, seq, 12}, x)}});
      expect_close(out["y"].to_f32(), seq_reference(x, w, b, seq), 1e-5, "seq " + std::to_string(seq));
    }
  // A param set through one executable is seen by the other.
  auto w2 = random_floats(144, 3);
  large->set_param_f32("w", w2.data(), w2.size());
  auto x = random_floats(2 * 5 * 12, 4);
  expect_close(small->run({{"x", HostTensor::from_f32({2, 5, 12}, x)}})["y"].to_f32(), seq_reference(x, w2, b, 5),
               1e-5, "after set_param through the other");
}

TEST(Session, ArenaShareRejectsWhatDoesNotFit) {
  CompileOptions o = cpu();
  o.arena_share = make_arena_share();
  auto small = compile(seq_graph(5), o);
  EXPECT_NE(error_of([&] { compile(seq_graph(29), o); }).find("compile the largest shape first"),
            std::string::npos);
  Graph other;
  other.output("y", other.relu(other.add(other.input("x", {2}, DType::F32), other.param("p", {2}, DType::F32))));
  EXPECT_NE(error_of([&] { compile(other, o); }).find("laid out differently"), std::string::npos);
  CompileOptions plain = cpu();
  auto lone = compile(seq_graph(5), plain);
  EXPECT_NE(error_of([&] { lone->share_params_with(*small); }).find("not compiled with one arena share"),
            std::string::npos);
}

// time_device_forwards is for the GPU: the CPU measures nothing and says so
// with an empty list; it refuses before a first run (no inputs in the arena),
// a count below one, and a schedule with state (replays would advance it).
TEST(Session, DeviceTimedForwardsNeedARunAndNoState) {
  Graph g;
  ValueId x = g.input("x", {3, 4}, DType::F32);
  g.output("y", g.add(x, x));
  auto exe = compile(g, cpu());
  std::string e = error_of([&] { exe->time_device_forwards(2); });
  EXPECT_NE(e.find("run the executable once first"), std::string::npos) << e;
  exe->run({{"x", HostTensor::from_f32({3, 4}, random_floats(12, 1))}});
  EXPECT_TRUE(exe->time_device_forwards(2).empty());
  e = error_of([&] { exe->time_device_forwards(0); });
  EXPECT_NE(e.find("at least 1"), std::string::npos) << e;

  Graph s;
  ValueId cache = s.state("cache", {1, 4, 2}, DType::F32);
  s.output("cache", s.kv_write(cache, s.input("rows", {1, 1, 2}, DType::F32), s.input("pos", {1}, DType::I32)));
  auto stateful = compile(s, cpu());
  e = error_of([&] { stateful->time_device_forwards(1); });
  EXPECT_NE(e.find("state ('cache')"), std::string::npos) << e;
}
