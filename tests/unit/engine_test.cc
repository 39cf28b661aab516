// The engine on the CPU backend (tests/data/tiny_llama.gguf): sequences that
// join and leave a running batch produce exactly the tokens each produces
// alone, one decode run per step for all of them; multi-turn prefills only
// the new tokens; stop strings, stop ids, the context limit, cancelling and
// bad requests.
#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "backends/cpu/cpu_quant_dot.h"
#include "backends/cpu/cpu_quant_gemm.h"
#include "backends/cpu/cpu_quant_rows16.h"
#include "engine/text_stream.h"
#include "models/llama_batch_check.h"  // tests/models
#include "rlx/error.h"
#include "rlx/llm.h"

namespace rlx {
namespace {

LlmOptions cpu_options(int sequences) {
  LlmOptions o;
  o.threads = 1;
  o.max_sequences = sequences;
  return o;
}

std::string reference_prompt() {
  std::ifstream in(std::string(RLX_SOURCE_DIR) + "/tests/data/tiny_llama_reference.json");
  EXPECT_TRUE(in);
  return nlohmann::json::parse(in).at("prompt").get<std::string>();
}

// Eight prompts of distinct lengths (3 to 22 tokens).
std::vector<std::vector<int32_t>> prompts(const LLM& llm) {
  const std::vector<int32_t> longest =
      llm.tokenizer().encode(reference_prompt() + " Then the dog woke up and ran away.", true, false);
  EXPECT_GE(longest.size(), 22u);
  std::vector<std::vector<int32_t>> out;
  for (size_t n : {12, 3, 22, 7, 17, 5, 20, 9}) out.emplace_back(longest.begin(), longest.begin() + std::ptrdiff_t(n));
  return out;
}

// Odd rows sample (each its own seed), even rows are greedy.
GenerateOptions options_for(size_t i, int n) {
  GenerateOptions o;
  o.max_tokens = n;
  o.ignore_eos = true;
  if (i % 2) {
    o.sampling.temperature = 0.8f + 0.1f * float(i);
    o.sampling.top_k = 20;
    o.sampling.top_p = 0.9f;
    o.sampling.seed = 1000 + i;
  }
  return o;
}

std::vector<int32_t> alone(const std::vector<int32_t>& prompt, const GenerateOptions& o) {
  LLM one(test::tiny_llama_path(), cpu_options(1));
  return one.generate(prompt, o).ids;
}

TEST(Engine, GreedyEqualsTheSingleSequenceGenerator) {
  LLM llm(test::tiny_llama_path(), cpu_options(2));
  GeneratorOptions go;
  go.threads = 1;
  LlamaGenerator single(test::tiny_llama_path(), go);
  const auto ps = prompts(llm);
  for (size_t i : {0, 2}) {
    GenerateOptions o;
    o.max_tokens = 20;
    o.ignore_eos = true;
    const Generation g = llm.generate(ps[i], o);
    EXPECT_EQ(g.ids, test::single_greedy(single, ps[i], 20)) << "prompt " << i;
    EXPECT_EQ(g.finish, FinishReason::Length);
    EXPECT_EQ(g.prompt_tokens, int64_t(ps[i].size()));
    EXPECT_EQ(g.prefilled_tokens, int64_t(ps[i].size()));
  }
}

// Eight sequences, greedy and sampled, joining every few steps and leaving
// at different lengths: each gets what it gets alone.
TEST(Engine, InterleavedSequencesEqualEachAlone) {
  LLM llm(test::tiny_llama_path(), cpu_options(8));
  const auto ps = prompts(llm);
  const int lengths[] = {30, 9, 20, 14, 25, 6, 18, 11};
  std::vector<std::vector<int32_t>> want;
  for (size_t i = 0; i < ps.size(); ++i) want.push_back(alone(ps[i], options_for(i, lengths[i])));

  std::vector<std::unique_ptr<Sequence>> seqs;
  std::vector<Generation> got(ps.size());
  std::vector<int> done(ps.size(), 0);
  size_t submitted = 0;
  int steps = 0;
  uint64_t max_rows = 0;
  while (true) {
    // A new sequence every third step.
    if (submitted < ps.size() && steps % 3 == 0) {
      const size_t i = submitted++;
      seqs.push_back(llm.new_sequence());
      llm.engine().submit(*seqs.back(), ps[i], options_for(i, lengths[i]), {}, [&, i](const Generation& g) {
        got[i] = g;
        ++done[i];
      });
    }
    max_rows = std::max<uint64_t>(max_rows, llm.engine().running());
    const uint64_t runs = llm.stats().decode_runs;
    const bool decoding = [&] {
      for (size_t i = 0; i < submitted; ++i)
        if (!done[i]) return true;
      return false;
    }();
    if (!llm.engine().step() && submitted == ps.size()) break;
    // One decode run per step while anything generates, whatever the batch.
    EXPECT_LE(llm.stats().decode_runs, runs + 1);
    (void)decoding;
    ++steps;
  }
  EXPECT_GE(max_rows, 5u);  // the batch did hold many sequences at once
  std::set<std::vector<int32_t>> distinct;
  for (size_t i = 0; i < ps.size(); ++i) {
    EXPECT_EQ(done[i], 1) << "sequence " << i;
    EXPECT_EQ(got[i].ids, want[i]) << "sequence " << i;
    EXPECT_EQ(int(got[i].ids.size()), lengths[i]);
    EXPECT_EQ(got[i].finish, FinishReason::Length);
    distinct.insert(got[i].ids);
  }
  EXPECT_EQ(distinct.size(), ps.size());
  const EngineStats s = llm.stats();
  EXPECT_EQ(s.prefill_runs, ps.size());  // each prompt fits one prefill run
  int total = 0;
  for (int n : lengths) total += n - 1;  // the first token of each comes from its prefill
  EXPECT_EQ(s.decoded_tokens, uint64_t(total));
  EXPECT_LT(s.decode_runs, uint64_t(total));  // rows shared runs
}

// Twelve greedy sequences over weights quantized at load, so the CPU's
// integer kernels run: a batch past kMatVecRows rows takes the RMSNorm apart
// from the products, a lone sequence has it fused into them, and each gets
// in the batch what it gets alone (the bits of both norms:
// MatVecFusion.QuantizedProductGivesTheSameBitsFusedOrApart).
TEST(Engine, QuantizedBatchPastTheFusedRowsEqualsEachAlone) {
  for (QuantType q : {QuantType::Q8_0, QuantType::Q4_0}) {
    LlmOptions o = cpu_options(12);
    o.quantize = q;
    LLM llm(test::tiny_llama_path(), o);
    const std::vector<int32_t> longest =
        llm.tokenizer().encode(reference_prompt() + " Then the dog woke up and ran away.", true, false);
    ASSERT_GE(longest.size(), 22u);
    std::vector<std::vector<int32_t>> ps;
    for (size_t n = 4; n < 16; ++n) ps.emplace_back(longest.begin(), longest.begin() + std::ptrdiff_t(n));
    GenerateOptions g;
    g.max_tokens = 12;
    g.ignore_eos = true;
    LlmOptions one_o = cpu_options(1);
    one_o.quantize = q;
    LLM one(test::tiny_llama_path(), one_o);
    std::vector<std::vector<int32_t>> want;
    for (const auto& p : ps) want.push_back(one.generate(p, g).ids);
    const std::vector<Generation> got = llm.generate_batch(ps, g);
    ASSERT_EQ(got.size(), ps.size());
    for (size_t i = 0; i < ps.size(); ++i)
      EXPECT_EQ(got[i].ids, want[i]) << quant_type_name(q) << " sequence " << i << " of " << ps.size();
    EXPECT_GT(cpu::quant_kernel_calls(cpu::quant_kernel()), 0u);
    EXPECT_NE(cpu::quant_kernel(), cpu::QuantKernel::F32) << "the integer kernels are the default";
  }
}

// Eighteen sequences decoding together: their steps have kQuantGemmRows
// rows or more, so the products take the tiled path (cpu_quant_gemm.h), and
// prompts of 16 tokens or more prefill on it; a sequence alone decodes on
// the one-row kernel. Each gets in the batch what it gets alone.
TEST(Engine, QuantizedBatchOnTheTiledPathEqualsEachAlone) {
  if (!cpu::quant_kernel_runs(cpu::QuantKernel::Avx512Vnni)) GTEST_SKIP() << "no AVX512-VNNI here";
  for (QuantType q : {QuantType::Q8_0, QuantType::Q4_0}) {
    LlmOptions o = cpu_options(18);
    o.quantize = q;
    LLM llm(test::tiny_llama_path(), o);
    const std::vector<int32_t> longest =
        llm.tokenizer().encode(reference_prompt() + " Then the dog woke up and ran away.", true, false);
    ASSERT_GE(longest.size(), 22u);
    std::vector<std::vector<int32_t>> ps;
    for (size_t n = 4; n < 22; ++n) ps.emplace_back(longest.begin(), longest.begin() + std::ptrdiff_t(n));
    GenerateOptions g;
    g.max_tokens = 10;
    g.ignore_eos = true;
    LlmOptions one_o = cpu_options(1);
    one_o.quantize = q;
    LLM one(test::tiny_llama_path(), one_o);
    std::vector<std::vector<int32_t>> want;
    for (const auto& p : ps) want.push_back(one.generate(p, g).ids);
    // Many rows of x in one product: the tiled kernel, or the interleaved
    // weights' kernel (which the tiny model's 16-row multiples take).
    const uint64_t tiled_before = cpu::quant_gemm_calls() + cpu::rows16_many_row_calls();
    const std::vector<Generation> got = llm.generate_batch(ps, g);
    EXPECT_GT(cpu::quant_gemm_calls() + cpu::rows16_many_row_calls(), tiled_before) << "no many-row product ran";
    ASSERT_EQ(got.size(), ps.size());
    for (size_t i = 0; i < ps.size(); ++i)
      EXPECT_EQ(got[i].ids, want[i]) << quant_type_name(q) << " sequence " << i << " of " << ps.size();
  }
}

TEST(Engine, BatchCallRunsEveryPromptTogether) {
  LLM llm(test::tiny_llama_path(), cpu_options(3));
  const auto ps = prompts(llm);
  GenerateOptions o;
  o.max_tokens = 12;
  o.ignore_eos = true;
  const std::vector<Generation> got = llm.generate_batch(ps, o);  // 8 prompts over 3 slots
  ASSERT_EQ(got.size(), ps.size());
  for (size_t i = 0; i < ps.size(); ++i) EXPECT_EQ(got[i].ids, alone(ps[i], o)) << "prompt " << i;
}

TEST(Engine, SecondTurnPrefillsOnlyItsTokensAndEqualsARecompute) {
  LLM llm(test::tiny_llama_path(), cpu_options(2));
  const auto ps = prompts(llm);
  GenerateOptions o;
  o.max_tokens = 8;
  o.ignore_eos = true;
  auto seq = llm.new_sequence();
  const Generation first = llm.generate(*seq, ps[0], o);
  ASSERT_EQ(first.ids.size(), 8u);
  const std::vector<int32_t> turn(ps[2].begin() + 3, ps[2].begin() + 9);
  const uint64_t before = llm.stats().prefilled_tokens;
  const Generation second = llm.generate(*seq, turn, o);
  // The new turn and the last reply token (not yet fed): nothing else runs again.
  EXPECT_EQ(llm.stats().prefilled_tokens - before, turn.size() + 1);
  EXPECT_EQ(second.prefilled_tokens, int64_t(turn.size() + 1));
  std::vector<int32_t> whole = ps[0];
  whole.insert(whole.end(), first.ids.begin(), first.ids.end());
  whole.insert(whole.end(), turn.begin(), turn.end());
  EXPECT_EQ(second.ids, llm.generate(whole, o).ids);
  EXPECT_EQ(int64_t(seq->tokens().size()), int64_t(whole.size()) + 8);
  // Truncating keeps the prefix's rows: the same continuation again, prefilled from there.
  seq->truncate(int64_t(ps[0].size()));
  const Generation again = llm.generate(*seq, {}, o);
  EXPECT_EQ(again.ids, first.ids);
  EXPECT_EQ(again.prefilled_tokens, 1);  // only the last prompt token runs again
}

TEST(Engine, StopTextSplitAcrossTokensEndsTheReply) {
  LLM llm(test::tiny_llama_path(), cpu_options(1));
  const auto ps = prompts(llm);
  GenerateOptions o;
  o.max_tokens = 30;
  o.ignore_eos = true;
  const Generation full = llm.generate(ps[4], o);
  // A stop string made of the end of one token's text and the start of the next.
  std::string stop;
  size_t at_token = 0;
  for (size_t i = 3; i + 1 < full.ids.size() && stop.empty(); ++i) {
    const std::string a = llm.tokenizer().token_text(full.ids[i]), b = llm.tokenizer().token_text(full.ids[i + 1]);
    if (!a.empty() && !b.empty() && a.back() != ' ' && b[0] != ' ') {
      stop = a.substr(a.size() - 1) + b.substr(0, 1);
      at_token = i + 1;
    }
  }
  ASSERT_FALSE(stop.empty());
  const size_t cut = full.text.find(stop);
  ASSERT_NE(cut, std::string::npos);
  o.stop = {stop};
  std::string streamed;
  const Generation g = llm.generate(ps[4], o, [&](const TextPiece& p) {
    streamed += p.text;
    return true;
  });
  EXPECT_EQ(g.finish, FinishReason::Stop);
  EXPECT_EQ(g.text, full.text.substr(0, cut));
  EXPECT_EQ(streamed, g.text);
  EXPECT_LE(g.ids.size(), at_token + 1);
  EXPECT_EQ(std::vector<int32_t>(full.ids.begin(), full.ids.begin() + std::ptrdiff_t(g.ids.size())), g.ids);
  // A stop id ends it at that token (included in ids, not in the text).
  GenerateOptions by_id = o;
  by_id.stop.clear();
  by_id.stop_ids = {full.ids[6]};
  const Generation h = llm.generate(ps[4], by_id);
  EXPECT_EQ(h.finish, FinishReason::Stop);
  const size_t first = size_t(std::find(full.ids.begin(), full.ids.end(), full.ids[6]) - full.ids.begin());
  EXPECT_EQ(h.ids, std::vector<int32_t>(full.ids.begin(), full.ids.begin() + std::ptrdiff_t(first + 1)));
}

TEST(Engine, ContextLimitEndsWithLength) {
  LLM llm(test::tiny_llama_path(), cpu_options(1));  // the model's context: 64 tokens
  ASSERT_EQ(llm.ctx_size(), 64);
  const auto ps = prompts(llm);
  std::vector<int32_t> prompt;
  while (prompt.size() < 60) prompt.insert(prompt.end(), ps[2].begin(), ps[2].end());
  prompt.resize(60);
  GenerateOptions o;
  o.max_tokens = 50;
  o.ignore_eos = true;
  const Generation g = llm.generate(prompt, o);
  EXPECT_EQ(g.finish, FinishReason::Length);
  EXPECT_TRUE(g.context_full);
  EXPECT_EQ(g.ids.size(), 5u);  // tokens 60..63 fed, the one after the last row chosen
  prompt.resize(65);
  EXPECT_THROW(llm.generate(prompt, o), Error);
}

TEST(Engine, CancelEndsTheRequestAndFreesTheSlot) {
  LLM llm(test::tiny_llama_path(), cpu_options(2));
  const auto ps = prompts(llm);
  GenerateOptions o;
  o.max_tokens = 30;
  o.ignore_eos = true;
  int pieces = 0;
  const Generation g = llm.generate(ps[0], o, [&](const TextPiece&) { return ++pieces < 3; });
  EXPECT_EQ(g.finish, FinishReason::Cancelled);
  EXPECT_EQ(pieces, 3);
  EXPECT_LT(g.ids.size(), 30u);
  // Engine::cancel on a running request.
  auto a = llm.new_sequence(), b = llm.new_sequence();
  EXPECT_THROW(llm.new_sequence(), Error);  // both slots held
  Generation ga, gb;
  const auto id = llm.engine().submit(*a, ps[1], o, {}, [&](const Generation& r) { ga = r; });
  llm.engine().submit(*b, ps[3], o, {}, [&](const Generation& r) { gb = r; });
  for (int i = 0; i < 4; ++i) llm.engine().step();
  llm.engine().cancel(id);
  while (llm.engine().step()) {
  }
  EXPECT_EQ(ga.finish, FinishReason::Cancelled);
  EXPECT_EQ(gb.finish, FinishReason::Length);
  EXPECT_EQ(gb.ids, alone(ps[3], o));
  a.reset();
  EXPECT_NO_THROW(llm.new_sequence());  // a's slot is free again
}

TEST(Engine, SeedIsRandomByDefaultAndRepeats) {
  LLM llm(test::tiny_llama_path(), cpu_options(1));
  const auto ps = prompts(llm);
  GenerateOptions o;
  o.max_tokens = 16;
  o.ignore_eos = true;
  o.sampling.temperature = 1.5f;
  const Generation a = llm.generate(ps[0], o), b = llm.generate(ps[0], o);
  EXPECT_NE(a.seed, b.seed);
  o.sampling.seed = a.seed;
  EXPECT_EQ(llm.generate(ps[0], o).ids, a.ids);
}

TEST(Engine, PenaltiesAndMinPChangeTheChoice) {
  LLM llm(test::tiny_llama_path(), cpu_options(1));
  const auto ps = prompts(llm);
  GenerateOptions o;
  o.max_tokens = 24;
  o.ignore_eos = true;
  const Generation plain = llm.generate(ps[1], o);
  o.sampling.repeat_penalty = 100.f;
  o.sampling.repeat_last_n = -1;
  const Generation penalized = llm.generate(ps[1], o);
  EXPECT_NE(plain.ids, penalized.ids);
  // A huge penalty over the whole sequence: fewer tokens seen before come again.
  auto repeats = [&](const std::vector<int32_t>& ids) {
    std::set<int32_t> seen(ps[1].begin(), ps[1].end());
    int n = 0;
    for (int32_t t : ids) n += !seen.insert(t).second;
    return n;
  };
  EXPECT_GT(repeats(plain.ids), 0);
  EXPECT_LT(repeats(penalized.ids), repeats(plain.ids));
  // min_p 1 keeps only the likeliest token: sampling is then greedy.
  GenerateOptions m;
  m.max_tokens = 24;
  m.ignore_eos = true;
  m.sampling.temperature = 2.f;
  m.sampling.min_p = 1.f;
  m.sampling.seed = 7;
  EXPECT_EQ(llm.generate(ps[1], m).ids, plain.ids);
}

TEST(Engine, BadRequestsAreClearErrors) {
  LLM llm(test::tiny_llama_path(), cpu_options(1));
  auto expect_error = [&](const std::vector<int32_t>& ids, const GenerateOptions& o, const std::string& needle) {
    try {
      llm.generate(ids, o);
      ADD_FAILURE() << "no error for " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  GenerateOptions o;
  expect_error({}, o, "empty prompt");
  expect_error({1, int32_t(llm.vocab_size())}, o, "outside the vocabulary");
  expect_error({1, -1}, o, "outside the vocabulary");
  GenerateOptions bad = o;
  bad.max_tokens = 0;
  expect_error({1}, bad, "max_tokens");
  bad = o;
  bad.sampling.top_p = 0.f;
  expect_error({1}, bad, "top_p");
  bad = o;
  bad.sampling.temperature = -1.f;
  expect_error({1}, bad, "temperature");
  bad = o;
  bad.sampling.min_p = 2.f;
  expect_error({1}, bad, "min_p");
  bad = o;
  bad.stop_ids = {int32_t(llm.vocab_size()) + 5};
  expect_error({1}, bad, "stop id");
  EXPECT_THROW(LLM(test::tiny_llama_path(), [] {
                 LlmOptions x = cpu_options(1);
                 x.ctx_size = 65;
                 return x;
               }()),
               Error);
  // The engine serves requests after the errors.
  o.max_tokens = 3;
  EXPECT_EQ(llm.generate({1, 2, 3}, o).ids.size(), 3u);
}

TEST(TextStream, WholeCharactersAndStopStrings) {
  TextStream s({"STOP"});
  EXPECT_EQ(s.push("a\xE2\x82"), "a");  // the euro sign's first two bytes wait
  EXPECT_EQ(s.push("\xAC b S"), "\xE2\x82\xAC b ");  // "S" may start STOP
  EXPECT_EQ(s.push("T"), "");
  EXPECT_EQ(s.push("x"), "STx");  // it did not
  EXPECT_EQ(s.push("ST"), "");
  EXPECT_EQ(s.push("OP and more"), "");
  EXPECT_TRUE(s.stopped());
  EXPECT_EQ(s.text(), "a\xE2\x82\xAC b STx");
  EXPECT_EQ(s.finish(), "");
  TextStream t;
  EXPECT_EQ(t.push("\xF0\x9F"), "");
  EXPECT_EQ(t.finish(), "\xF0\x9F");  // an unfinished character still comes out at the end
}

}  // namespace
}  // namespace rlx
