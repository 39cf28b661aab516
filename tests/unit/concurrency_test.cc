// One Embedder, one Executable, one LLM and one LlamaGenerator shared by 4
// threads, as a server shares them between requests: every result equals the
// one-thread result, bit for bit. The ThreadSanitizer build in .ci/run runs
// these too.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <cmath>
#include <thread>

#include "models/decoder_family_files.h"  // tests/models
#include "models/embedder.h"
#include "models/llama_generator.h"
#include "models/encoder_demo.h"
#include "models/test_files.h"  // tests/models
#include "rlx/llm.h"
#include "rlx/session.h"
#include "test_util.h"
#include "thunks/thunk.h"

namespace rlx {
namespace {

constexpr int kThreads = 4;

// Runs f(thread) on kThreads threads at once.
template <class F>
void on_threads(F f) {
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t) ts.emplace_back([&, t] { f(t); });
  for (auto& th : ts) th.join();
}

TEST(Concurrency, OneEmbedderSharedByFourThreads) {
  ASSERT_TRUE(test::minilm_present());
  // Different lengths per thread, so threads want different buckets at once.
  std::vector<std::vector<std::string>> texts(kThreads);
  for (int t = 0; t < kThreads; ++t)
    for (int i = 0; i <= t; ++i) {
      std::string s = "thread " + std::to_string(t) + " sentence " + std::to_string(i);
      for (int k = 0; k < t * 9; ++k) s += " more words";
      texts[size_t(t)].push_back(s);
    }
  EmbedderOptions o;
  o.max_batch = 2;
  std::vector<std::vector<std::vector<float>>> alone(kThreads);
  {
    Embedder one(test::minilm_dir(), o);
    for (int t = 0; t < kThreads; ++t) alone[size_t(t)] = one.embed(texts[size_t(t)]);
  }
  Embedder shared(test::minilm_dir(), o);
  constexpr int kRounds = 3;
  std::vector<int> mismatches(kThreads, 0), empty(kThreads, 0);
  on_threads([&](int t) {
    for (int r = 0; r < kRounds; ++r) {
      auto got = shared.embed(texts[size_t(t)]);
      if (got != alone[size_t(t)]) ++mismatches[size_t(t)];
      for (const auto& v : got) empty[size_t(t)] += v.empty() || std::all_of(v.begin(), v.end(), [](float x) { return x == 0; });
    }
  });
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(mismatches[size_t(t)], 0) << "thread " << t << " got other embeddings than alone";
    EXPECT_EQ(empty[size_t(t)], 0) << "thread " << t;
  }
  // Several buckets were asked for. (How many stay compiled depends on the
  // order: growing the arena for a larger one drops those compiled before.)
  std::set<std::pair<int64_t, int64_t>> asked;
  for (const Bucket& b : shared.buckets_used()) asked.insert({b.batch, b.seq});
  EXPECT_GE(asked.size(), 2u);
  EXPECT_GE(shared.compiled_buckets(), 1u);
}

// One call of 1100 texts tokenizes on several threads (a part per 512
// texts): the rows, the truncation flags and --no-truncate's error index are
// those of calls of 100 texts, which tokenize on one.
TEST(Concurrency, ALargeCallTokenizesOnSeveralThreads) {
  ASSERT_TRUE(test::minilm_present());
  const size_t cores = std::max(1u, std::thread::hardware_concurrency());
  EXPECT_EQ(embed_tokenize_threads(1100, Device::Cpu, 0), std::min<size_t>(cores, 2));
  EXPECT_EQ(embed_tokenize_threads(1100, Device::Cpu, 1), 1u);  // the caller's one thread
  EXPECT_EQ(embed_tokenize_threads(511, Device::Cuda, 0), 1u);
  EXPECT_EQ(embed_tokenize_threads(100000, Device::Cuda, 0), std::min<size_t>(cores, 8));
  std::vector<std::string> texts;
  for (int i = 0; i < 1100; ++i)
    texts.push_back(i % 97 == 5 ? "a long one " + std::to_string(i) + " with words past eight tokens"
                                : "text " + std::to_string(i * 7919 % 1000));
  EmbedderOptions o;
  o.max_len = 8;
  o.max_batch = 256;
  Embedder e(test::minilm_dir(), o);
  std::vector<uint8_t> cut;
  EmbedCall whole;
  whole.truncated = &cut;
  const auto all = e.embed(texts, whole);
  ASSERT_EQ(all.size(), texts.size());
  ASSERT_EQ(cut.size(), texts.size());
  for (size_t start = 0; start < texts.size(); start += 100) {
    std::vector<std::string> part(texts.begin() + long(start), texts.begin() + long(std::min(texts.size(), start + 100)));
    std::vector<uint8_t> part_cut;
    EmbedCall call;
    call.truncated = &part_cut;
    const auto rows = e.embed(part, call);
    for (size_t i = 0; i < rows.size(); ++i) {
      ASSERT_EQ(rows[i], all[start + i]) << "text " << start + i;
      ASSERT_EQ(part_cut[i], cut[start + i]) << "text " << start + i;
      ASSERT_EQ(cut[start + i], (start + i) % 97 == 5 ? 1 : 0) << "text " << start + i;
    }
  }
  o.truncate = false;
  Embedder strict(test::minilm_dir(), o);
  for (size_t i = 0; i < 600; ++i)  // the first long text is now 684, in the second part
    if (i % 97 == 5) texts[i] = "short";
  const std::string err = test::error_of([&] { strict.embed(texts); });
  EXPECT_NE(err.find("text 684 is longer"), std::string::npos) << err;
}

TEST(Concurrency, OneExecutableSharedByFourThreads) {
  EncoderShape s;
  s.layers = 2;
  s.hidden = 48;
  s.heads = 4;
  s.ffn = 80;
  s.vocab = 101;
  s.batch = 3;
  s.seq = 13;
  auto exe = compile(build_encoder_demo(s));
  test::Rng rng(7);
  for (const Binding& b : exe->schedule().param_bindings) {
    auto v = test::random_floats(size_t(numel(b.shape)), rng.next(), -0.2f, 0.2f);
    exe->set_param_f32(b.name, v.data(), v.size());
  }
  std::vector<std::map<std::string, HostTensor>> inputs(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    auto ids = test::random_ints(size_t(s.batch * s.seq), 100 + uint64_t(t), 0, s.vocab - 1);
    std::vector<int32_t> mask(ids.size(), 1);
    for (int64_t j = s.seq - 1 - t; j < s.seq; ++j) mask[size_t(j)] = 0;  // row 0 padded per thread
    inputs[size_t(t)] = {{"input_ids", HostTensor::from_i32({s.batch, s.seq}, ids)},
                         {"attention_mask", HostTensor::from_i32({s.batch, s.seq}, mask)}};
  }
  std::vector<std::vector<uint8_t>> alone(kThreads);
  for (int t = 0; t < kThreads; ++t) alone[size_t(t)] = exe->run(inputs[size_t(t)]).at("last_hidden_state").bytes;
  for (int t = 1; t < kThreads; ++t) ASSERT_NE(alone[0], alone[size_t(t)]) << "inputs must differ per thread";
  std::vector<float> h0 = test::from_bytes(alone[0], DType::F32);
  ASSERT_EQ(h0.size(), size_t(s.batch * s.seq * s.hidden));
  EXPECT_TRUE(std::all_of(h0.begin(), h0.end(), [](float x) { return std::isfinite(x); }));
  EXPECT_FALSE(std::all_of(h0.begin(), h0.end(), [](float x) { return x == 0; }));
  constexpr int kRounds = 10;
  std::vector<int> mismatches(kThreads, 0);
  on_threads([&](int t) {
    for (int r = 0; r < kRounds; ++r) {
      if (r % 2 == 0) {
        if (exe->run(inputs[size_t(t)]).at("last_hidden_state").bytes != alone[size_t(t)]) ++mismatches[size_t(t)];
      } else {  // submit/wait from several threads too
        uint64_t ticket = exe->submit(inputs[size_t(t)]);
        if (exe->wait(ticket).at("last_hidden_state").bytes != alone[size_t(t)]) ++mismatches[size_t(t)];
      }
    }
  });
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(mismatches[size_t(t)], 0) << "thread " << t;
}

std::string tiny_llama() { return std::string(RLX_SOURCE_DIR) + "/tests/data/tiny_llama.gguf"; }

// A different prompt per thread, of different lengths.
std::vector<int32_t> thread_prompt(int t) {
  std::vector<int32_t> p;
  for (int i = 0; i <= 2 * t + 1; ++i) p.push_back(int32_t(3 + 7 * t + 5 * i));
  return p;
}

TEST(Concurrency, OneLlmSharedByFourThreads) {
  LlmOptions o;
  o.device = Device::Cpu;
  o.threads = 1;
  o.max_sequences = kThreads;  // each thread holds at most one sequence
  GenerateOptions g;
  g.max_tokens = 6;
  g.ignore_eos = true;
  std::vector<std::vector<int32_t>> alone(kThreads);
  LLM llm(tiny_llama(), o);
  for (int t = 0; t < kThreads; ++t) alone[size_t(t)] = llm.generate(thread_prompt(t), g).ids;
  for (int t = 1; t < kThreads; ++t) ASSERT_NE(alone[0], alone[size_t(t)]) << "continuations must differ per thread";
  std::vector<int> mismatches(kThreads, 0);
  on_threads([&](int t) {
    for (int r = 0; r < 2; ++r) {
      if (llm.generate(thread_prompt(t), g).ids != alone[size_t(t)]) ++mismatches[size_t(t)];
      // A sequence of its own, held across two calls.
      auto seq = llm.new_sequence();
      std::vector<int32_t> got = llm.generate(*seq, thread_prompt(t), g).ids;
      if (got != alone[size_t(t)]) ++mismatches[size_t(t)];
    }
  });
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(mismatches[size_t(t)], 0) << "thread " << t;
}

// A model split over two host ranks (each a thread meeting the other at
// every all_reduce; loads and recordings on both at once), shared by four
// threads: each gets the whole model's tokens.
TEST(Concurrency, ASplitLlmSharedByFourThreads) {
  const test::Family f = test::llama3();
  test::TempDir d;
  test::write_hf_dir(d.path(), f, test::weights_of(f.cfg));
  LlmOptions o;
  o.device = Device::Cpu;
  o.threads = 1;
  o.max_sequences = kThreads;
  GenerateOptions g;
  g.max_tokens = 5;
  g.ignore_eos = true;
  std::vector<std::vector<int32_t>> alone(kThreads);
  {
    LLM whole(d.path().string(), o);
    for (int t = 0; t < kThreads; ++t) alone[size_t(t)] = whole.generate(thread_prompt(t), g).ids;
  }
  o.tensor_parallel = 2;
  LLM split(d.path().string(), o);
  std::vector<int> mismatches(kThreads, 0);
  on_threads([&](int t) {
    if (split.generate(thread_prompt(t), g).ids != alone[size_t(t)]) ++mismatches[size_t(t)];
  });
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(mismatches[size_t(t)], 0) << "thread " << t;
}

TEST(Concurrency, OneGeneratorSharedByFourThreads) {
  GeneratorOptions o;
  o.device = Device::Cpu;
  o.threads = 1;
  LlamaGenerator gen(tiny_llama(), o);
  std::vector<int32_t> alone(kThreads);
  for (int t = 0; t < kThreads; ++t) alone[size_t(t)] = gen.next_token(thread_prompt(t));
  std::vector<int> mismatches(kThreads, 0);
  on_threads([&](int t) {
    for (int r = 0; r < 3; ++r)
      if (gen.next_token(thread_prompt(t)) != alone[size_t(t)]) ++mismatches[size_t(t)];
  });
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(mismatches[size_t(t)], 0) << "thread " << t;
}

}  // namespace
}  // namespace rlx
