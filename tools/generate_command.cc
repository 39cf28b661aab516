// `rlx generate`: text from a LLaMA-family GGUF or Hugging Face directory,
// streamed as it is produced, then prompt and decode speeds. The prompt
// comes from --prompt TEXT (`-` reads stdin), --file F or --prompt-ids
// (which also prints ids, so a model directory without a tokenizer serves
// as a decode benchmark). Generation runs on the engine (rlx/llm.h): one
// sequence, or --batch B copies of the prompt decoded together (a
// benchmark: the first streams, the decode speed counts all B). Exit status
// 0 also when the context fills (a message says so), 1 on an error.
// --recompute runs the full prefix per token (LlamaGenerator without a KV
// cache), the reference the cached path is checked against.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>
#include <random>
#include <sstream>

#include "backends/trace.h"
#include "models/llama_generator.h"
#include "models/sampling.h"
#include "rlx/error.h"
#include "rlx/llm.h"
#include "tokenizers/utf8.h"
#include "tools/cli_options.h"
#include "tools/commands.h"
#include "tools/profile_range.h"

namespace {

namespace fs = std::filesystem;

struct GenerateArgs {
  std::string model, prompt, file, prompt_ids, device = "cpu", dtype = "f32", quantize, devices;
  int n = 128, threads = 0, batch = 1, tensor_parallel = 1;
  int64_t ctx = 0, seed = -1;
  bool chat = false, recompute = false, ignore_eos = false, warmup = false;
  std::vector<std::string> stop;
  rlx::SamplingParams sampling;
};
// Length of the longest prefix of s that does not end inside a UTF-8 sequence.
size_t complete_utf8(const std::string& s) {
  size_t n = s.size();
  for (size_t back = 1; back <= 4 && back <= n; ++back) {
    unsigned char c = static_cast<unsigned char>(s[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    size_t need = rlx::utf8_sequence_length(c);
    return need > back ? n - back : n;
  }
  return n;
}

// "1,2,3" -> {1, 2, 3}; every id in [0, vocab).
std::vector<int32_t> parse_ids(const std::string& text, int64_t vocab) {
  std::vector<int32_t> ids;
  // getline drops a trailing empty item: "1,2," would pass as "1,2".
  RLX_CHECK(!text.empty() && text.back() != ',', "--prompt-ids: '" << text << "' has an empty item");
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    size_t used = 0;
    long long v = -1;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    RLX_CHECK(!item.empty(), "--prompt-ids: '" << text << "' has an empty item");
    RLX_CHECK(used == item.size(), "--prompt-ids: '" << item << "' is not an integer");
    RLX_CHECK(v >= 0 && v < vocab, "--prompt-ids: id " << v << " is outside the vocabulary [0, " << vocab << ")");
    ids.push_back(int32_t(v));
  }
  return ids;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

struct Timing {
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now(), last = start;
  double prompt_s = 0, decode_s = 0;
  int64_t pieces_with_ids = 0;
};

std::string read_prompt_text(const GenerateArgs& a) {
  if (!a.file.empty()) {
    std::ifstream in(a.file, std::ios::binary);
    RLX_CHECK(in, "--file: cannot read '" << a.file << "'");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  if (a.prompt == "-") return std::string(std::istreambuf_iterator<char>(std::cin), {});
  return a.prompt;
}

rlx::GenerateOptions generate_options(const GenerateArgs& a, rlx::LLM& llm) {
  rlx::GenerateOptions g;
  g.max_tokens = a.n;
  g.ignore_eos = a.ignore_eos;
  g.stop = a.stop;
  g.sampling = a.sampling;
  if (a.seed >= 0) g.sampling.seed = uint64_t(a.seed);
  return a.chat ? llm.chat_options(g) : g;
}

// --batch B: the prompt B times through the engine together (greedy).
void run_batch(const GenerateArgs& a, rlx::LLM& llm, const std::vector<int32_t>& ids, bool as_ids, double load_s) {
  const auto t0 = std::chrono::steady_clock::now();
  const rlx::EngineStats before = llm.stats();
  std::vector<rlx::Generation> out =
      llm.generate_batch(std::vector<std::vector<int32_t>>(size_t(a.batch), ids), generate_options(a, llm));
  const double s = seconds_since(t0);
  const rlx::EngineStats st = llm.stats();
  const rlx::Generation& first = out[0];
  if (as_ids) {
    for (size_t i = 0; i < first.ids.size(); ++i) {
      if (first.finish == rlx::FinishReason::Eos && i + 1 == first.ids.size()) break;
      std::printf("%s%d", i ? "," : "", first.ids[i]);
    }
  } else {
    std::fwrite(first.text.data(), 1, first.text.size(), stdout);
  }
  std::printf("\n");
  int64_t tokens = 0;
  for (const auto& g : out) tokens += int64_t(g.ids.size());
  std::fprintf(stderr, "rlx: load %.2f s; prompt %lld tokens (%d x %zu); %lld tokens in %.2f s, %.1f tok/s with the prefill "
               "(%s, engine, batch %d: %llu prefill runs, %llu decode steps for all %d sequences)\n",
               load_s, (long long)(ids.size() * size_t(a.batch)), a.batch, ids.size(), (long long)tokens, s,
               s > 0 ? double(tokens) / s : 0.0, a.device.c_str(), a.batch,
               (unsigned long long)(st.prefill_runs - before.prefill_runs),
               (unsigned long long)(st.decode_runs - before.decode_runs), a.batch);
}

// --recompute: the whole prefix per token, no KV cache (the reference).
void run_recompute(const GenerateArgs& a, const std::string& path) {
  rlx::GeneratorOptions o;
  o.device = device_option(a.device);
  o.device_index = device_index_option(a.device);
  o.dtype = dtype_option(a.dtype);
  o.threads = a.threads;
  o.kv_cache = false;
  o.sampling.temperature = a.sampling.temperature;
  o.sampling.top_k = a.sampling.top_k;
  o.sampling.top_p = a.sampling.top_p;
  o.sampling.seed = a.seed >= 0 ? uint64_t(a.seed) : 0;
  const auto t0 = std::chrono::steady_clock::now();
  rlx::LlamaGenerator gen(path, o);
  std::vector<int32_t> ids = !a.prompt_ids.empty() ? parse_ids(a.prompt_ids, gen.config().vocab_size)
                                                   : gen.tokenizer().encode(read_prompt_text(a));
  RLX_CHECK(!ids.empty(), "the prompt is empty");
  const int64_t total = std::min<int64_t>(int64_t(ids.size()) + a.n, gen.config().max_positions);
  if (int64_t(ids.size()) + a.n > total)
    std::fprintf(stderr, "rlx: -n %d with a prompt of %zu tokens is more than the context holds (%d tokens): the "
                 "reply stops when the context is full\n", a.n, ids.size(), gen.config().max_positions);
  gen.reserve(total);
  gen.prepare();
  std::fprintf(stderr, "rlx: load %.2f s\n", seconds_since(t0));
  std::string pending;
  int printed = 0;
  while (int64_t(ids.size()) < total) {
    const int32_t next = gen.next_token(ids);
    if (!a.ignore_eos && next == gen.eos_id()) break;
    ids.push_back(next);
    if (!a.prompt_ids.empty()) {
      std::printf("%s%d", printed++ ? "," : "", next);
    } else {
      pending += gen.tokenizer().token_bytes(next);
      const size_t n = complete_utf8(pending);
      std::fwrite(pending.data(), 1, n, stdout);
      pending.erase(0, n);
    }
    std::fflush(stdout);
  }
  std::fwrite(pending.data(), 1, pending.size(), stdout);
  std::printf("\n");
  std::fprintf(stderr, "rlx: full-prefix recompute: %llu decode steps\n", (unsigned long long)gen.decode_steps());
}

void run_generate(const GenerateArgs& a) {
  RLX_CHECK(a.n >= 0, "-n must be >= 0");
  const int sources = int(!a.prompt.empty()) + int(!a.file.empty()) + int(!a.prompt_ids.empty());
  RLX_CHECK(sources == 1, "give one of --prompt TEXT (- for stdin), --file F and --prompt-ids 1,2,3");
  RLX_CHECK(!a.chat || a.prompt_ids.empty(), "--chat needs a text prompt");
  RLX_CHECK(a.batch >= 1 && a.batch <= 1024, "--batch must be in [1, 1024]");
  RLX_CHECK(a.batch == 1 || (!a.recompute && a.sampling.temperature <= 0.f),
            "--batch decodes greedily over the KV cache: not with --recompute or --temperature");
  RLX_CHECK(a.batch == 1 || a.n > 0, "--batch needs -n of at least 1");
  RLX_CHECK(a.ctx >= 0, "--ctx-size must be >= 0");
  RLX_CHECK(a.tensor_parallel == 1 || !a.recompute, "--tensor-parallel runs over the KV cache: not with --recompute");
  RLX_CHECK(a.sampling.top_p > 0.f && a.sampling.top_p <= 1.f, "--top-p must be in (0, 1]");
  rlx::check_sampling(a.sampling);  // before the model loads
  const std::string path = decoder_model_path(a.model);
  if (a.recompute) return run_recompute(a, path);
  const bool as_ids = !a.prompt_ids.empty();
  const bool trace = rlx::parse_trace_env(std::getenv("RLX_TRACE")).decode;

  const auto t0 = std::chrono::steady_clock::now();
  rlx::LlmOptions o;
  o.device = device_option(a.device);
  o.device_index = device_index_option(a.device);
  o.tensor_parallel = a.tensor_parallel;
  if (!a.devices.empty()) {  // the GPU of each rank, named: a group even of one (the NCCL path)
    RLX_CHECK(o.device == rlx::Device::Cuda, "--devices names GPUs: give --device cuda");
    for (const std::string& e : split_list(a.devices)) o.devices.push_back(gpu_index_option("--devices", e));
    RLX_CHECK(int(o.devices.size()) == o.tensor_parallel,
              "--devices names " << o.devices.size() << " GPUs for --tensor-parallel " << o.tensor_parallel);
    o.device_index = o.devices[0];
  }
  o.dtype = dtype_option(a.dtype);
  o.threads = a.threads;
  o.ctx_size = a.ctx;
  o.max_sequences = a.batch;
  if (!a.quantize.empty()) {
    rlx::QuantType q;
    RLX_CHECK(rlx::parse_quant_type(a.quantize, &q), "--quantize must be q8_0, q4_0, q4_1 or fp8, not '" << a.quantize << "'");
    o.quantize = q;
  }
  rlx::LLM llm(path, o);
  std::vector<int32_t> ids;
  if (as_ids) {
    ids = parse_ids(a.prompt_ids, llm.vocab_size());
  } else {
    RLX_CHECK(llm.has_tokenizer(), "'" << path << "' has no tokenizer (no tokenizer.json): give --prompt-ids");
    const std::string text = read_prompt_text(a);
    ids = a.chat ? llm.chat_tokens({{"user", text}}) : llm.tokenizer().encode(text, true, false);
  }
  RLX_CHECK(!ids.empty(), "the prompt is empty");
  RLX_CHECK(int64_t(ids.size()) < llm.ctx_size(), "the prompt has " << ids.size() << " tokens; the context holds "
                                                                      << llm.ctx_size() << " (--ctx-size)");
  if (int64_t(ids.size()) + a.n > llm.ctx_size())
    std::fprintf(stderr, "rlx: -n %d with a prompt of %zu tokens is more than the context holds (%lld tokens, "
                 "--ctx-size): the reply stops when the context is full\n", a.n, ids.size(), (long long)llm.ctx_size());
  const double load_s = seconds_since(t0);  // graphs for other shapes compile on first use
  if (a.warmup) {
    // The same prompt once, untimed: the graphs the timed run uses are
    // compiled and recorded first, so its rates are of warm graphs (as
    // llama-bench's warm-up run); the sequence is freed, so the timed run
    // computes the whole prompt again.
    const auto w0 = std::chrono::steady_clock::now();
    rlx::GenerateOptions w = generate_options(a, llm);
    w.max_tokens = std::min(a.n, 2);
    w.ignore_eos = true;
    w.stop.clear();
    if (a.batch > 1) llm.generate_batch(std::vector<std::vector<int32_t>>(size_t(a.batch), ids), w);
    else llm.generate(ids, w);
    std::fprintf(stderr, "rlx: warm-up (the prompt and %d tokens, untimed) %.2f s\n", w.max_tokens, seconds_since(w0));
  }
  if (a.batch > 1) return run_batch(a, llm, ids, as_ids, load_s);

  Timing t;
  int64_t printed = 0;
  const rlx::EngineStats st0 = llm.stats();  // the warm-up's steps are not this run's
  const rlx::Generation g = llm.generate(ids, generate_options(a, llm), [&](const rlx::TextPiece& p) {
    const auto now = std::chrono::steady_clock::now();
    if (!p.ids.empty()) {
      const double step = std::chrono::duration<double>(now - t.last).count();
      (t.pieces_with_ids == 0 ? t.prompt_s : t.decode_s) += step;
      if (trace) {
        for (int32_t id : p.ids)
          std::fprintf(stderr, "rlx decode: token %lld id %d: step %.1f us (host wall time)\n",
                       (long long)t.pieces_with_ids, id, step * 1e6 / double(p.ids.size()));
      }
      t.pieces_with_ids += int64_t(p.ids.size());
      t.last = now;
    }
    if (as_ids) {
      for (int32_t id : p.ids) {
        if (id == llm.eos_id() && !a.ignore_eos) continue;
        std::printf("%s%d", printed++ ? "," : "", id);
      }
    } else {
      std::fwrite(p.text.data(), 1, p.text.size(), stdout);
    }
    std::fflush(stdout);
    return true;
  });
  std::printf("\n");
  std::fflush(stdout);
  const int64_t produced = int64_t(g.ids.size());
  const rlx::EngineStats st = llm.stats();
  std::fprintf(stderr, "rlx: load %.2f s; prompt %zu tokens, %.1f tok/s; decode %lld tokens, %.2f tok/s "
               "(%s, KV cache: %llu decode steps; finish %s)\n",
               load_s, ids.size(), t.prompt_s > 0 ? double(ids.size()) / t.prompt_s : 0.0,
               (long long)(produced > 1 ? produced - 1 : 0),
               produced > 1 && t.decode_s > 0 ? double(produced - 1) / t.decode_s : 0.0, a.device.c_str(),
               (unsigned long long)(st.decode_runs - st0.decode_runs), rlx::finish_reason_name(g.finish));
  if (a.sampling.temperature > 0.f) std::fprintf(stderr, "rlx: seed %llu\n", (unsigned long long)g.seed);
  if (g.context_full) {
    std::fprintf(stderr, "rlx: the context is full (%lld tokens, --ctx-size): the reply stopped there\n",
                 (long long)llm.ctx_size());
  }
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto a = std::make_shared<GenerateArgs>();
  auto* cmd = app.add_subcommand("generate", "Generate text with a decoder (Llama, Mistral, Qwen2/3, Phi-3)");
  cmd->add_option("--model", a->model,
                  "a .gguf file, a directory holding one, or a Hugging Face directory (llama, mistral, qwen2, qwen3, "
                  "phi3) (default: models/" + std::string(kDefaultDecoderModel) + ")");
  cmd->add_option("--prompt", a->prompt, "the text to continue (- reads it from stdin)");
  cmd->add_option("--file", a->file, "read the text to continue from this file");
  cmd->add_option("--prompt-ids", a->prompt_ids,
                  "token ids to continue, comma-separated (prints ids; no tokenizer needed)");
  cmd->add_flag("--ignore-eos", a->ignore_eos, "do not stop at the end-of-sequence token: always -n tokens");
  cmd->add_option("-n", a->n, "most tokens to generate")->check(non_negative());
  cmd->add_option("--stop", a->stop, "text that ends the reply (not printed); may be given several times");
  cmd->add_option("--ctx-size", a->ctx, "tokens the sequence can hold (0: the model's context, at most 4096)");
  cmd->add_option("--temperature", a->sampling.temperature, "0 = greedy (the default)")->check(non_negative());
  cmd->add_option("--top-k", a->sampling.top_k, "sample among the k most likely tokens (0 = all)");
  cmd->add_option("--top-p", a->sampling.top_p, "sample among the most likely tokens holding this probability");
  cmd->add_option("--min-p", a->sampling.min_p, "drop tokens less likely than this times the most likely");
  cmd->add_option("--repeat-penalty", a->sampling.repeat_penalty, "llama.cpp's repetition penalty (1 = none)");
  cmd->add_option("--presence-penalty", a->sampling.presence_penalty, "subtracted once from a seen token's logit");
  cmd->add_option("--frequency-penalty", a->sampling.frequency_penalty, "subtracted per occurrence");
  cmd->add_option("--seed", a->seed, "seed of the sampler (default: random, printed)");
  cmd->add_option("--device", a->device, "cpu, cuda, cuda:N (a GPU by index) or auto")->check(device_choices());
  cmd->add_option("--dtype", a->dtype, "f32, f16 or bf16")->check(CLI::IsMember({"f32", "f16", "bf16"}));
  cmd->add_option("--threads", a->threads, "CPU threads (0 = all cores)")->check(non_negative());
  cmd->add_option("--quantize", a->quantize,
                  "q8_0, q4_0, q4_1 or fp8 (e4m3 codes, a scale per 32): hold the matmul weights quantized (those a "
                  "GGUF stores so always are; q4_1 on the CPU only)")
      ->check(CLI::IsMember({"q8_0", "q4_0", "q4_1", "fp8"}));
  cmd->add_option("--tensor-parallel", a->tensor_parallel,
                  "split the model over N GPUs (cuda:K: GPUs K..K+N-1) by heads and FFN rows; on the CPU, N ranks "
                  "on threads (for testing the split)")
      ->check(CLI::Range(1, 64));
  cmd->add_option("--devices", a->devices,
                  "the GPU of each --tensor-parallel rank (0,1 or cuda:2,cuda:3); naming one runs the model through "
                  "the tensor-parallel path on one GPU");
  cmd->add_option("--batch", a->batch,
                  "decode B copies of the prompt at once (greedy; a benchmark: prints the first, tok/s counts all B)");
  cmd->add_flag("--warmup", a->warmup,
                "run the prompt once untimed first, so the printed rates are of compiled, recorded graphs");
  cmd->add_flag("--recompute", a->recompute, "no KV cache: recompute the whole prefix per token (a reference)");
  cmd->add_flag("--chat", a->chat, "the prompt as a user turn in the model's chat template");
  cmd->callback([a] { run_generate(*a); });
}
