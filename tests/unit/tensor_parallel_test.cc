// Tensor parallelism on the CPU, ranks as threads of this process
// (HostCollective): the all_reduce thunk over 2-4 ranks equals the unsplit
// product; a decoder split over ranks (llama_shard.h) gives the whole
// model's logits and greedy tokens in every family, from Hugging Face
// directories and quantized GGUFs; configs that cannot split are refused by
// name; a rank that fails wakes the others instead of leaving them waiting.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "engine/engine_impl.h"
#include "engine/rank_threads.h"
#include "models/decoder_family_files.h"  // tests/models
#include "models/gguf_writer.h"           // tests/models
#include "models/moe_family_files.h"       // tests/models
#include "models/gguf.h"
#include "models/llama_shard.h"
#include "thunks/quant_math.h"
#include "rlx/error.h"
#include "rlx/llm.h"
#include "runtime/collective.h"
#include "test_util.h"

namespace rlx {
namespace {

// Rank r's share of x [m, k] . w [n, k]^T: its k / ranks columns of both.
Graph split_product(int64_t m, int64_t n, int64_t k_rank, DType dt) {
  Graph g;
  ValueId x = g.input("x", {m, k_rank}, dt);
  ValueId w = g.input("w", {n, k_rank}, dt);
  g.output("y", g.all_reduce(g.matmul(x, w, false, true)));
  return g;
}

std::vector<float> columns(const std::vector<float>& a, int64_t rows, int64_t cols, int64_t from, int64_t count) {
  std::vector<float> out;
  for (int64_t r = 0; r < rows; ++r)
    out.insert(out.end(), a.begin() + r * cols + from, a.begin() + r * cols + from + count);
  return out;
}

TEST(AllReduce, RanksSumToTheUnsplitProduct) {
  for (DType dt : {DType::F32, DType::BF16}) {
    for (int ranks : {2, 3, 4}) {
      const int64_t m = 5, n = 37, k = 24 * ranks;
      const std::vector<float> x = test::quantize(test::random_floats(size_t(m * k), 11 + ranks), dt);
      const std::vector<float> w = test::quantize(test::random_floats(size_t(n * k), 21 + ranks), dt);
      std::vector<double> ref(size_t(m * n), 0.0);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j)
          for (int64_t c = 0; c < k; ++c) ref[size_t(i * n + j)] += double(x[size_t(i * k + c)]) * w[size_t(j * k + c)];
      auto group = make_collective(Device::Cpu, ranks);
      std::vector<std::unique_ptr<Executable>> exes;
      for (int r = 0; r < ranks; ++r) {
        CompileOptions co;
        co.threads = 1;
        co.collective = group;
        co.rank = r;
        exes.push_back(compile(split_product(m, n, k / ranks, dt), co));
        EXPECT_EQ(exes.back()->report().thunk_histogram.at("all_reduce"), 1);
      }
      std::vector<std::vector<float>> got(static_cast<size_t>(ranks));
      RankThreads threads(ranks);
      threads.run([&](int r) {
        const int64_t kr = k / ranks;
        got[size_t(r)] = exes[size_t(r)]
                             ->run({{"x", HostTensor::from_f32({m, kr}, columns(x, m, k, r * kr, kr), dt)},
                                    {"w", HostTensor::from_f32({n, kr}, columns(w, n, k, r * kr, kr), dt)}})
                             .at("y")
                             .to_f32();
      });
      const std::string what = std::string(dtype_name(dt)) + " over " + std::to_string(ranks) + " ranks";
      test::expect_close(got[0], ref, dt == DType::F32 ? 1e-5 : 2e-2, what);
      for (int r = 1; r < ranks; ++r) EXPECT_EQ(got[size_t(r)], got[0]) << what << ": rank " << r << " differs";
      EXPECT_EQ(static_cast<HostCollective&>(*group).all_reduces(), 1u) << what;
    }
  }
}

TEST(AllGather, RanksStackInRankOrder) {
  for (int ranks : {2, 3, 4}) {
    auto group = make_collective(Device::Cpu, ranks);
    std::vector<std::unique_ptr<Executable>> exes;
    std::vector<std::vector<float>> in;
    for (int r = 0; r < ranks; ++r) {
      Graph g;
      g.output("y", g.all_gather(g.input("x", {2, 5}, DType::F16), ranks));
      CompileOptions co;
      co.threads = 1;
      co.collective = group;
      co.rank = r;
      exes.push_back(compile(g, co));
      in.push_back(test::quantize(test::random_floats(10, 40 + r), DType::F16));
    }
    std::vector<std::vector<float>> got(static_cast<size_t>(ranks));
    RankThreads threads(ranks);
    threads.run([&](int r) {
      got[size_t(r)] = exes[size_t(r)]->run({{"x", HostTensor::from_f32({2, 5}, in[size_t(r)], DType::F16)}}).at("y").to_f32();
    });
    std::vector<float> want;
    for (const auto& v : in) want.insert(want.end(), v.begin(), v.end());
    for (int r = 0; r < ranks; ++r) EXPECT_EQ(got[size_t(r)], want) << ranks << " ranks, rank " << r;
  }
}

TEST(AllReduce, OneRankIsACopy) {
  Graph g;
  g.output("y", g.all_reduce(g.input("x", {3, 7}, DType::F32)));
  auto exe = compile(g, {});
  const std::vector<float> x = test::random_floats(21, 5);
  EXPECT_EQ(exe->run({{"x", HostTensor::from_f32({3, 7}, x)}}).at("y").to_f32(), x);
}

// A rank whose run fails aborts the group: the rank waiting for it at an
// all_reduce fails too instead of waiting forever.
TEST(AllReduce, AFailedRankWakesTheOthers) {
  auto group = make_collective(Device::Cpu, 2);
  CompileOptions co;
  co.threads = 1;
  co.collective = group;
  auto exe = compile(split_product(2, 3, 4, DType::F32), co);
  std::atomic<bool> waiting_done{false};
  std::string error;
  std::thread waiter([&] {
    try {
      exe->run({{"x", HostTensor::from_f32({2, 4}, test::random_floats(8, 1))},
                {"w", HostTensor::from_f32({3, 4}, test::random_floats(12, 2))}});
    } catch (const Error& e) {
      error = e.what();
    }
    waiting_done = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(waiting_done) << "rank 0 did not wait for rank 1";
  group->abort("rank 1 ran out of memory");
  waiter.join();
  EXPECT_NE(error.find("rank 1 ran out of memory"), std::string::npos) << error;
}

TEST(RankThreads, RunsEveryRankAndRethrowsTheFirstError) {
  RankThreads t(3);
  std::vector<int> seen(3, 0);
  t.run([&](int r) { seen[size_t(r)] += r + 1; });
  EXPECT_EQ(seen, (std::vector<int>{1, 2, 3}));
  std::string told;
  EXPECT_THROW(t.run([&](int r) { if (r == 2) throw Error("rank two failed"); },
                     [&](const std::string& why) { told = why; }),
               Error);
  EXPECT_EQ(told, "rank two failed");
  t.run([&](int r) { seen[size_t(r)] += 10; });  // still usable
  EXPECT_EQ(seen, (std::vector<int>{11, 12, 13}));
}

// The largest of 4, 3, 2 that splits the family's heads, KV heads and FFN.
int ranks_for(const LlamaConfig& c) {
  for (int r : {4, 3, 2})
    if (c.num_heads % r == 0 && c.num_kv_heads % r == 0 && c.intermediate_size % r == 0) return r;
  return 1;
}

// The whole model and its split run the same prompt; after the prefill and
// after each of four decode steps the split's logits equal the whole's (f32,
// summed in another order) and its greedy choice is the same.
void expect_split_equals_whole(const std::string& path, int ranks, const std::string& what,
                               std::optional<QuantType> quantize = std::nullopt, double tol = 1e-5) {
  LlmOptions o;
  o.threads = 1;
  o.max_sequences = 2;
  o.quantize = quantize;
  LLM whole(path, o);
  o.tensor_parallel = ranks;
  LLM split(path, o);
  PoolRunner& a = pool_runner_of(whole.engine());
  PoolRunner& b = pool_runner_of(split.engine());
  ASSERT_EQ(b.tensor_parallel(), ranks);
  const std::vector<int32_t> ids = test::random_ids(11, int(whole.vocab_size()), 17);
  PoolRunner::Choice ca = a.prefill(1, ids, 0, true), cb = b.prefill(1, ids, 0, true);
  test::expect_close(cb.logits, test::to_double(ca.logits), tol, what + ": prefill logits");
  ASSERT_EQ(cb.argmax, ca.argmax) << what;
  int64_t pos = int64_t(ids.size());
  for (int step = 0; step < 4; ++step, ++pos) {
    const auto ra = a.decode({{1, ca.argmax, pos}}, true), rb = b.decode({{1, cb.argmax, pos}}, true);
    test::expect_close(rb[0].logits, test::to_double(ra[0].logits), tol,
                       what + ": logits of decode step " + std::to_string(step));
    ca = ra[0];
    cb = rb[0];
    ASSERT_EQ(cb.argmax, ca.argmax) << what << " step " << step;
  }
  // Every rank ran each decode step, through its all_reduce nodes.
  const int layers = whole.engine().impl().runner.decode_executable(1, true).report().thunk_histogram.count("all_reduce");
  EXPECT_EQ(layers, 0) << "the whole model has no all_reduce";
  for (int r = 0; r < ranks; ++r) {
    Executable& e = b.decode_executable(1, true, r);
    EXPECT_EQ(e.run_count(), 4u) << what << ": rank " << r;
    EXPECT_GT(e.report().thunk_histogram.at("all_reduce"), 0) << what << ": rank " << r;
  }
  // Each rank holds its share, not the whole.
  EXPECT_LT(b.weight_bytes() / uint64_t(ranks), a.weight_bytes()) << what;
  // Greedy generation through the engine: the same tokens.
  GenerateOptions g;
  g.max_tokens = 6;
  g.ignore_eos = true;
  EXPECT_EQ(split.generate(ids, g).ids, whole.generate(ids, g).ids) << what;
}

class SplitFamily : public ::testing::TestWithParam<test::Family (*)()> {};

// Families whose fixture sizes split no way are given ones that do.
test::Family splittable(test::Family f) {
  if (ranks_for(f.cfg) == 1) {
    f.cfg.num_kv_heads = 2;
    f.cfg.num_heads = 4;
    f.cfg.intermediate_size = 332;
  }
  return f;
}

TEST_P(SplitFamily, HuggingFaceDirectorySplitEqualsWhole) {
  const test::Family f = splittable(GetParam()());
  test::TempDir d;
  test::write_hf_dir(d.path(), f, test::weights_of(f.cfg));
  expect_split_equals_whole(d.path().string(), ranks_for(f.cfg), f.name + " over " + std::to_string(ranks_for(f.cfg)));
}

// Weights quantized at load (Q8_0): the products split along their inputs
// keep whole blocks per rank. The bound is wider than for floats: the
// integer kernels quantize each product's activations, so the other sum
// order's last-bit differences can flip an activation's rounding (measured
// 1.0e-4 to 1.7e-4 of the largest logit; a wrong slice moves logits by
// their whole size).
TEST_P(SplitFamily, QuantizedAtLoadSplitEqualsWhole) {
  test::Family f = GetParam()();
  f.cfg.hidden_size = 64;
  f.cfg.intermediate_size = 128;
  f.cfg.num_heads = 4;
  f.cfg.num_kv_heads = 2;
  f.cfg.head_dim = f.cfg.rope_dims = 16;
  f.cfg.rope_freq_divisors.clear();
  f.extra_json.clear();
  if (f.cfg.embed_scale > 0) f.cfg.embed_scale = std::sqrt(64.f);
  test::TempDir d;
  test::write_hf_dir(d.path(), f, test::weights_of(f.cfg));
  expect_split_equals_whole(d.path().string(), 2, f.name + " q8_0 over 2", QuantType::Q8_0, 5e-4);
}

// An untied LM head whose vocabulary divides is split by rows too; each
// rank's logits are gathered (one all_gather a run). The families with
// untied heads: Qwen2, Phi-3, Gemma 3.
TEST(TensorParallel, UntiedHeadSplitsTheVocabulary) {
  for (test::Family (*family)() : {&test::qwen2, &test::phi3, &test::gemma3}) {
    test::Family f = splittable(family());
    ASSERT_FALSE(f.cfg.tie_embeddings) << f.name;
    const int ranks = ranks_for(f.cfg);
    f.cfg.vocab_size = 300;
    test::TempDir d;
    test::write_hf_dir(d.path(), f, test::weights_of(f.cfg));
    LlmOptions o;
    o.threads = 1;
    o.tensor_parallel = ranks;
    {
      LLM split(d.path().string(), o);
      PoolRunner& r = pool_runner_of(split.engine());
      for (int k = 0; k < ranks; ++k)
        EXPECT_EQ(r.decode_executable(1, true, k).report().thunk_histogram.at("all_gather"), 1) << f.name << " rank " << k;
    }
    expect_split_equals_whole(d.path().string(), ranks, f.name + " vocabulary over " + std::to_string(ranks));
  }
}

// More ranks than KV heads: ranks share KV heads (each holds one, the
// ranks of its query heads), as vLLM does; with Q|K|V fused (Phi-3), K/V
// biases (Qwen2) and one KV head for all (Gemma 3).
TEST_P(SplitFamily, MoreRanksThanKvHeadsShareThem) {
  test::Family f = GetParam()();
  if (f.cfg.num_experts > 0) GTEST_SKIP();
  const int ranks = f.cfg.num_heads;  // one query head a rank
  f.cfg.intermediate_size = 60 * ranks;
  ASSERT_EQ(f.cfg.num_kv_heads % ranks == 0, false) << "this case is about shared KV heads";
  test::TempDir d;
  test::write_hf_dir(d.path(), f, test::weights_of(f.cfg));
  expect_split_equals_whole(d.path().string(), ranks, f.name + " over " + std::to_string(ranks) + " ranks, " +
                                                          std::to_string(f.cfg.num_kv_heads) + " KV heads");
}

INSTANTIATE_TEST_SUITE_P(Families, SplitFamily,
                         ::testing::Values(&test::llama3, &test::qwen2, &test::qwen3, &test::mistral, &test::phi3,
                                           &test::gemma2, &test::gemma3),
                         [](const auto& info) { return info.param().name; });

TEST_P(SplitFamily, GgufSplitEqualsWhole) {
  test::Family f = splittable(GetParam()());
  if (f.model_type == "mistral") GTEST_SKIP() << "Mistral GGUFs are architecture llama (the llama3 case)";
  if (test::is_gemma(f)) f.cfg.query_scale = 1.f / std::sqrt(float(f.cfg.head_dim));
  test::TempDir d;
  test::write_gguf(d.path() / "m.gguf", f, test::weights_of(f.cfg));
  expect_split_equals_whole((d.path() / "m.gguf").string(), ranks_for(f.cfg), f.name + " GGUF");
}

// llama.cpp's blocks of `t` for w (rows of k), as a GGUF stores them.
test::GgufBlocks gguf_blocks(QuantType t, const std::vector<float>& w, int64_t k) {
  const size_t qb = size_t(quant_block_bytes(t));
  std::string bytes;
  std::vector<uint8_t> q(qb);
  uint16_t d[2];
  for (size_t j = 0; j < w.size(); j += kQuantBlock) {
    quantize_row(t, w.data() + j, kQuantBlock, q.data(), d);
    bytes.append(reinterpret_cast<const char*>(d), 2);
    bytes.append(reinterpret_cast<const char*>(q.data()), qb);
  }
  (void)k;
  return {uint32_t(t == QuantType::Q8_0 ? GgmlType::Q8_0 : GgmlType::Q4_0), bytes};
}

// A GGUF holding its products as Q8_0 and Q4_0 blocks, kept as stored: each
// rank takes whole blocks of the products split along their inputs.
TEST(TensorParallel, HeldQuantizedGgufSplitEqualsWhole) {
  test::Family f = test::qwen2();
  LlamaConfig& c = f.cfg;
  c.hidden_size = 128;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = c.rope_dims = 32;
  c.intermediate_size = 256;
  const test::Weights w = test::weights_of(c);
  std::map<std::string, test::GgufBlocks> blocks;
  int i = 0;
  for (const auto& [name, shape] : llama_matmul_weights(c))
    if (name != "token_embd.weight")
      blocks[name] = gguf_blocks(i++ % 2 ? QuantType::Q4_0 : QuantType::Q8_0, w.at(name), shape.back());
  test::TempDir d;
  test::write_gguf(d.path() / "m.gguf", f, w, nullptr, blocks);
  expect_split_equals_whole((d.path() / "m.gguf").string(), 2, "Q8_0/Q4_0 GGUF over 2", std::nullopt, 5e-4);
}

// Mixture-of-experts layers: every expert's FFN rows split (the router whole
// on each rank), from Hugging Face directories and a GGUF; Qwen3-MoE's dense
// layer beside its sparse ones.
TEST(TensorParallel, ExpertsSplitEqualWhole) {
  test::Family q = test::qwen3_moe();  // 6 heads, 3 KV heads: 3 ranks
  q.cfg.expert_ffn = 39;
  q.extra_json.replace(q.extra_json.find("\"moe_intermediate_size\": 37"), 27, "\"moe_intermediate_size\": 39");
  test::Family m = test::mixtral();  // 6 heads, 2 KV heads: 2 ranks
  m.cfg.intermediate_size = m.cfg.expert_ffn = 38;
  for (const auto& [f, ranks] : {std::pair{q, 3}, std::pair{m, 2}}) {
    test::TempDir d;
    const test::Weights w = test::weights_of(f.cfg);
    test::write_moe_hf_dir(d.path(), f, w);
    expect_split_equals_whole(d.path().string(), ranks, f.name + " over " + std::to_string(ranks));
    test::write_moe_gguf(d.path() / "m.gguf", f, w);
    expect_split_equals_whole((d.path() / "m.gguf").string(), ranks, f.name + " GGUF over " + std::to_string(ranks));
  }
}

// llama_rank_config(c, ranks) fails with a message holding `names`.
void expect_refused(const LlamaConfig& c, int ranks, const std::string& names) {
  try {
    llama_rank_config(c, ranks);
    ADD_FAILURE() << "split over " << ranks << " ranks: expected a refusal naming " << names;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(names), std::string::npos) << e.what();
  }
}

TEST(TensorParallel, ConfigsThatCannotSplitAreRefusedByName) {
  LlamaConfig c = test::odd_config();  // 6 heads, 2 KV heads, FFN 776
  expect_refused(c, 4, "num_attention_heads 6");
  c.num_heads = 12;
  expect_refused(c, 3, "num_key_value_heads 2");
  // 4 ranks share 2 KV heads, two ranks each.
  EXPECT_EQ(llama_rank_config(c, 4).num_kv_heads, 1);
  c.num_heads = 6;
  c.num_experts = 4;
  c.experts_per_token = 2;
  c.expert_ffn = 33;
  expect_refused(c, 2, "moe_intermediate_size");
  // A quantized product whose rank share is no whole blocks.
  LlamaConfig q = test::odd_config();
  q.num_heads = 4;
  q.head_dim = 24;  // q_dim 96: 48 a rank
  EXPECT_THROW(llama_rank_config(q, 2, {{"blk.0.attn_output.weight", QuantType::Q8_0}}), Error);
  EXPECT_THROW(llama_rank_config(q, 2, {{"blk.0.ffn_down.weight", QuantType::Q8_0}}), Error);  // 776 / 2 = 388
  q.intermediate_size = 768;  // 384 a rank: 12 blocks
  EXPECT_NO_THROW(llama_rank_config(q, 2, {{"blk.0.ffn_down.weight", QuantType::Q8_0}}));
}

TEST(TensorParallel, SliceTakesTheRanksPieceOfEachPart) {
  // [6 rows of 2]: parts of 4 and 2 rows over 2 ranks: rank 1 takes rows 2, 3 and 5.
  std::vector<int32_t> t;
  for (int i = 0; i < 12; ++i) t.push_back(i);
  Shape local;
  auto b = slice_for_rank("t", t.data(), 4, {6, 2}, ParamSlice{0, {4, 2}}, TpRank{1, 2}, &local);
  EXPECT_EQ(local, (Shape{3, 2}));
  std::vector<int32_t> got(b.size() / 4);
  std::memcpy(got.data(), b.data(), b.size());
  EXPECT_EQ(got, (std::vector<int32_t>{4, 5, 6, 7, 10, 11}));
  // Last dim: rank 0 of 2 takes the first half of every row.
  b = slice_for_rank("t", t.data(), 4, {3, 4}, ParamSlice{-1, {}}, TpRank{0, 2}, &local);
  EXPECT_EQ(local, (Shape{3, 2}));
  got.resize(b.size() / 4);
  std::memcpy(got.data(), b.data(), b.size());
  EXPECT_EQ(got, (std::vector<int32_t>{0, 1, 4, 5, 8, 9}));
  // Dim 1 of an expert stack [2, 4, 1]: rank 1 of 2 takes rows 2, 3 of each expert.
  std::vector<int32_t> e8(t.begin(), t.begin() + 8);
  b = slice_for_rank("e", e8.data(), 4, {2, 4, 1}, ParamSlice{1, {}}, TpRank{1, 2}, &local);
  EXPECT_EQ(local, (Shape{2, 2, 1}));
  got.resize(b.size() / 4);
  std::memcpy(got.data(), b.data(), b.size());
  EXPECT_EQ(got, (std::vector<int32_t>{2, 3, 6, 7}));
  EXPECT_THROW(slice_for_rank("t", t.data(), 4, {3, 4}, ParamSlice{0, {}}, TpRank{0, 2}, &local), Error);
}

}  // namespace
}  // namespace rlx
