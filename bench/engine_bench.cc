// The engine under load, through the public API only (rlx/llm.h): a model
// loaded once, then
//   - batch 1: one sequence after a PROMPT-token prompt, NEW tokens;
//   - together: SEQS sequences with different PROMPT-token prompts arriving
//     at once, NEW tokens each, greedy;
//   - staggered: the same, one arriving every STAGGER/SEQS steps over the
//     first STAGGER steps; every sequence must get the tokens it got in the
//     together run (which equal what each gets alone: tests/unit/engine_test.cc);
// and the load time, the weights, KV pool and arena bytes.
//   rlx_engine_bench MODEL [--device cuda] [--dtype f16] [--seqs 32] [--prompt 512] [--new 128]
//                          [--ctx 2048] [--stagger 64] [--alone K] [--threads N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "rlx/llm.h"

namespace {

using clock_type = std::chrono::steady_clock;
double since(clock_type::time_point t) { return std::chrono::duration<double>(clock_type::now() - t).count(); }

// Prompt s: PROMPT ids, different for every s (any ids serve: the weights are random).
std::vector<int32_t> prompt_ids(int s, int len, int64_t vocab) {
  std::vector<int32_t> ids(static_cast<size_t>(len));
  for (int i = 0; i < len; ++i) ids[size_t(i)] = int32_t(1 + (int64_t(s) * 7919 + int64_t(i) * 31) % (vocab - 1));
  return ids;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL [--device cpu|cuda] [--dtype f32|f16|bf16] [--seqs N] [--prompt N] "
                 "[--new N] [--ctx N] [--stagger N] [--alone K] [--quantize q8_0|q4_0] [--threads N]\n", argv[0]);
    return 2;
  }
  rlx::LlmOptions o;
  int seqs = 32, prompt = 512, fresh = 128, stagger = 64, alone = 2;
  o.ctx_size = 2048;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--device") o.device = v == "cuda" ? rlx::Device::Cuda : rlx::Device::Cpu;
    else if (k == "--dtype") o.dtype = v == "f16" ? rlx::DType::F16 : v == "bf16" ? rlx::DType::BF16 : rlx::DType::F32;
    else if (k == "--seqs") seqs = std::atoi(v.c_str());
    else if (k == "--prompt") prompt = std::atoi(v.c_str());
    else if (k == "--new") fresh = std::atoi(v.c_str());
    else if (k == "--ctx") o.ctx_size = std::atoll(v.c_str());
    else if (k == "--stagger") stagger = std::atoi(v.c_str());
    else if (k == "--alone") alone = std::atoi(v.c_str());
    else if (k == "--threads") o.threads = std::atoi(v.c_str());
    else if (k == "--quantize") o.quantize = v == "q4_0" ? rlx::QuantType::Q4_0 : rlx::QuantType::Q8_0;
    else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      return 2;
    }
  }
  o.max_sequences = seqs;
  try {
    auto t0 = clock_type::now();
    rlx::LLM llm(argv[1], o);
    {
      // Ready to answer: the weights loaded and the first prefill graph compiled.
      rlx::GenerateOptions one;
      one.max_tokens = 1;
      llm.generate(prompt_ids(0, 8, llm.vocab_size()), one);
    }
    const double load_s = since(t0);
    auto tp = clock_type::now();
    llm.prepare();  // every bucket's graphs, so that no timed run compiles
    const double prepare_s = since(tp);
    rlx::GenerateOptions g;
    g.max_tokens = fresh;
    g.ignore_eos = true;
    {
      auto s = llm.new_sequence();
      llm.generate(*s, prompt_ids(0, prompt, llm.vocab_size()), g);
    }
    std::printf("load + first graph %.2f s, every other bucket %.2f s (%s)\n", load_s, prepare_s, llm.backend_summary().c_str());

    // Batch 1: the first step prefills and chooses the first token; the rest decode.
    {
      auto s = llm.new_sequence();
      rlx::Generation r;
      bool done = false;
      llm.engine().submit(*s, prompt_ids(1, prompt, llm.vocab_size()), g, {}, [&](const rlx::Generation& x) {
        r = x;
        done = true;
      });
      auto t = clock_type::now();
      llm.engine().step();
      const double first = since(t);
      auto td = clock_type::now();
      while (!done) llm.engine().step();
      const double dt = since(td);
      std::printf("batch 1, depth %d: prefill + first token %.2f ms; decode %zu tokens %.0f tok/s\n", prompt,
                  first * 1e3, r.ids.size() - 2, double(r.ids.size() - 2) / dt);
    }

    // Together, then staggered: decode tok/s counts the tokens chosen by
    // decode runs over the time from the first step with every prompt
    // prefilled to the end.
    std::vector<std::vector<int32_t>> together(static_cast<size_t>(seqs));
    for (int pass = 0; pass < 2; ++pass) {
      std::vector<std::unique_ptr<rlx::Sequence>> held;
      std::vector<rlx::Generation> got(static_cast<size_t>(seqs));
      int submitted = 0, done = 0, steps = 0;
      const int every = pass == 0 ? 0 : std::max(1, stagger / seqs);
      const rlx::EngineStats s0 = llm.stats();
      auto t = clock_type::now();
      clock_type::time_point decode_from{};
      uint64_t decoded_from = 0;
      while (done < seqs) {
        while (submitted < seqs && (every == 0 || steps >= submitted * every)) {
          const int i = submitted++;
          held.push_back(llm.new_sequence());
          llm.engine().submit(*held.back(), prompt_ids(100 + i, prompt, llm.vocab_size()), g, {},
                              [&, i](const rlx::Generation& r) {
                                got[size_t(i)] = r;
                                ++done;
                              });
        }
        llm.engine().step();
        ++steps;
        if (decode_from == clock_type::time_point{} && submitted == seqs &&
            llm.stats().prefill_runs - s0.prefill_runs == uint64_t(seqs)) {
          decode_from = clock_type::now();
          decoded_from = llm.stats().decoded_tokens;
        }
      }
      const double dt = since(t), ddt = std::chrono::duration<double>(clock_type::now() - decode_from).count();
      const rlx::EngineStats s1 = llm.stats();
      const uint64_t tokens = uint64_t(seqs) * uint64_t(fresh);
      int same = 0;
      double common = 0;
      for (int i = 0; i < seqs; ++i) {
        const auto& a = got[size_t(i)].ids;
        if (pass == 0) {
          together[size_t(i)] = a;
          continue;
        }
        const auto& b = together[size_t(i)];
        same += a == b;
        common += double(std::mismatch(a.begin(), a.end(), b.begin(), b.end()).first - a.begin());
      }
      std::printf("%s: %d sequences x %d prompt + %d new: %llu tokens in %.3f s: %.0f tok/s overall "
                  "(prefill included); decode after the last prefill %.0f tok/s; %llu prefill runs, %llu decode "
                  "runs",
                  pass == 0 ? "together" : "staggered", seqs, prompt, fresh, (unsigned long long)tokens, dt,
                  double(tokens) / dt, double(s1.decoded_tokens - decoded_from) / ddt,
                  (unsigned long long)(s1.prefill_runs - s0.prefill_runs),
                  (unsigned long long)(s1.decode_runs - s0.decode_runs));
      if (pass == 1)
        std::printf("; %d of %d sequences equal their together run token for token (mean common prefix %.1f of %d)",
                    same, seqs, common / seqs, fresh);
      std::printf("\n");
    }
    // A few sequences alone against their together run.
    for (int i = 0; i < alone && i < seqs; ++i) {
      auto s = llm.new_sequence();
      rlx::Generation r = llm.generate(*s, prompt_ids(100 + i, prompt, llm.vocab_size()), g);
      const auto& b = together[size_t(i)];
      std::printf("sequence %d alone: %s (common prefix %td of %d)\n", i, r.ids == b ? "equals its batched run" : "differs",
                  std::mismatch(r.ids.begin(), r.ids.end(), b.begin(), b.end()).first - r.ids.begin(), fresh);
    }
    const rlx::EngineStats s = llm.stats();
    std::printf("memory: weights %.1f MB, KV pool %.1f MB (%d slots x %lld tokens), arena %.1f MB; %d graphs compiled\n",
                double(s.weight_bytes) / 1e6, double(s.kv_pool_bytes) / 1e6, llm.max_sequences(),
                (long long)llm.ctx_size(), double(s.arena_bytes) / 1e6, s.compiled_graphs);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rlx_engine_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
