// `rlx generate`: text from a LLaMA-family GGUF or Hugging Face directory, streamed as it is produced,
// then prompt and decode speeds. Decoding advances on the device
// (LlamaGenerator::next_token): the greedy choice (temperature 0) or a draw
// with --temperature/--top-k/--top-p/--seed, one run per token with the token
// read back; --recompute samples the logits on the host. --prompt-ids takes
// and prints token ids, so a model directory without a tokenizer serves as a
// decode benchmark. --batch B decodes B copies of the prompt together
// (LlamaBatchGenerator: one prefill run, then one decode run per token for
// all B), streams the first and counts all B in the decode speed.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <filesystem>
#include <iostream>
#include <optional>

#include "models/chat_template.h"
#include "models/llama_batch_generator.h"
#include "models/llama_generator.h"
#include "models/sampling.h"
#include "backends/trace.h"
#include "rlx/error.h"
#include "tokenizers/utf8.h"
#include "tools/cli_options.h"
#include "tools/profile_range.h"
#include "tools/commands.h"

namespace {

namespace fs = std::filesystem;

struct GenerateArgs {
  std::string model, prompt, prompt_ids, device = "cpu", dtype = "f32", quantize;
  int n = 128, threads = 0, batch = 1;
  bool chat = false, recompute = false, ignore_eos = false;
  rlx::SamplingOptions sampling;
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
    RLX_CHECK(used == item.size() && !item.empty(), "--prompt-ids: '" << item << "' is not an integer");
    RLX_CHECK(v >= 0 && v < vocab, "--prompt-ids: id " << v << " is outside the vocabulary [0, " << vocab << ")");
    ids.push_back(int32_t(v));
  }
  return ids;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// Streams generated tokens: ids (comma-separated) or text, holding back the
// bytes of an unfinished UTF-8 character.
class TokenPrinter {
 public:
  TokenPrinter(const rlx::LlamaGenerator& gen, bool as_ids) : gen_(gen), as_ids_(as_ids) {}
  void add(int32_t id) {
    if (as_ids_) {
      std::printf("%s%d", printed_++ ? "," : "", id);
      std::fflush(stdout);
      return;
    }
    pending_ += gen_.tokenizer().token_bytes(id);
    size_t n = complete_utf8(pending_);
    std::fwrite(pending_.data(), 1, n, stdout);
    std::fflush(stdout);
    pending_.erase(0, n);
  }
  void finish() {
    std::fwrite(pending_.data(), 1, pending_.size(), stdout);
    pending_.clear();
    std::printf("\n");
    std::fflush(stdout);
  }

 private:
  const rlx::LlamaGenerator& gen_;
  bool as_ids_;
  int printed_ = 0;
  std::string pending_;
};

// --batch B: the prompt B times, decoded together; each step is one run for
// all B sequences. A sequence ends at its end-of-sequence token (unless
// --ignore-eos) and the loop when all have; the first one streams.
void run_generate_batch(const GenerateArgs& a, rlx::LlamaGenerator& gen, const std::vector<int32_t>& ids,
                        int64_t total, bool as_ids, std::chrono::steady_clock::time_point t0) {
  using clock = std::chrono::steady_clock;
  const int64_t B = a.batch;
  rlx::LlamaBatchGenerator batch(gen, B, total);
  batch.prepare(int64_t(ids.size()));
  const double load_s = seconds_since(t0);
  const int32_t im_end = a.chat ? gen.tokenizer().id_of("<|im_end|>") : -1;
  auto ends = [&](int32_t t) { return !a.ignore_eos && (t == gen.eos_id() || (a.chat && t == im_end)); };
  const int64_t n = total - int64_t(ids.size());
  TokenPrinter print(gen, as_ids);
  std::vector<bool> live(size_t(B), true);
  int64_t live_count = B, decode_tokens = 0, steps = 0;
  double prompt_s = 0, decode_s = 0;
  for (int64_t i = 0; i < n && live_count > 0; ++i) {
    auto t = clock::now();
    std::vector<int32_t> next;
    if (i == 0) {
      next = batch.start(std::vector<std::vector<int32_t>>(size_t(B), ids));
      prompt_s = seconds_since(t);
    } else {
      ProfileRange range("rlx decode");
      next = batch.step();
      decode_s += seconds_since(t);
      ++steps;
      decode_tokens += live_count;  // as at batch 1, a sequence's end-of-sequence token counts
    }
    for (int64_t b = 0; b < B; ++b) {
      if (!live[size_t(b)]) continue;
      if (ends(next[size_t(b)])) {
        live[size_t(b)] = false;
        --live_count;
      } else if (b == 0) {
        print.add(next[0]);
      }
    }
  }
  print.finish();
  const size_t prompt_tokens = ids.size() * size_t(B);
  std::fprintf(stderr, "rlx: load + compile %.2f s; prompt %zu tokens (%lld x %zu), %.1f tok/s; decode %lld tokens "
               "(%lld sequences %s %lld steps), %.2f tok/s (%s, KV cache, batch %lld: %llu prefill run, %llu decode "
               "steps for all %lld sequences)\n",
               load_s, prompt_tokens, static_cast<long long>(B), ids.size(),
               prompt_s > 0 ? double(prompt_tokens) / prompt_s : 0.0, static_cast<long long>(decode_tokens),
               static_cast<long long>(B), decode_tokens == B * steps ? "x" : "over", static_cast<long long>(steps),
               decode_s > 0 ? double(decode_tokens) / decode_s : 0.0, a.device.c_str(), static_cast<long long>(B),
               static_cast<unsigned long long>(batch.prefill_runs()),
               static_cast<unsigned long long>(batch.decode_steps()), static_cast<long long>(B));
}

void run_generate(const GenerateArgs& a) {
  using clock = std::chrono::steady_clock;
  RLX_CHECK(a.n >= 0, "-n must be >= 0");
  RLX_CHECK(a.prompt.empty() != a.prompt_ids.empty(), "give one of --prompt TEXT and --prompt-ids 1,2,3");
  RLX_CHECK(!a.chat || a.prompt_ids.empty(), "--chat needs --prompt TEXT");
  RLX_CHECK(a.batch >= 1, "--batch must be >= 1");
  RLX_CHECK(a.batch == 1 || (!a.recompute && a.sampling.temperature <= 0.f),
            "--batch decodes greedily over the KV cache: not with --recompute or --temperature");
  RLX_CHECK(a.batch == 1 || a.n > 0, "--batch needs -n of at least 1");
  const bool as_ids = !a.prompt_ids.empty();
  const bool trace = rlx::parse_trace_env(std::getenv("RLX_TRACE")).decode;
  const std::string path = decoder_model_path(a.model);
  rlx::Sampler check(a.sampling);  // throws on bad options before the model loads
  auto t0 = clock::now();
  rlx::GeneratorOptions o;
  o.device = device_option(a.device);
  o.dtype = dtype_option(a.dtype);
  o.threads = a.threads;
  o.kv_cache = !a.recompute;
  o.sampling = a.sampling;
  if (!a.quantize.empty()) {
    rlx::QuantType q;
    RLX_CHECK(rlx::parse_quant_type(a.quantize, &q), "--quantize must be q8_0 or q4_0, not '" << a.quantize << "'");
    o.quantize = q;
  }
  rlx::LlamaGenerator gen(path, o);
  std::vector<int32_t> ids;
  if (as_ids) {
    ids = parse_ids(a.prompt_ids, gen.config().vocab_size);
  } else {
    const std::string text = a.chat ? rlx::render_chat(gen.chat_template(), a.prompt) : a.prompt;
    ids = gen.tokenizer().encode(text);
  }
  RLX_CHECK(!ids.empty(), "the prompt is empty (give --prompt TEXT)");
  const int64_t ctx = gen.config().max_positions;
  RLX_CHECK(int64_t(ids.size()) < ctx, "the prompt has " << ids.size() << " tokens, the context is " << ctx);
  const int64_t total = std::min<int64_t>(int64_t(ids.size()) + a.n, ctx);
  if (a.batch > 1) return run_generate_batch(a, gen, ids, total, as_ids, t0);
  gen.reserve(total);
  gen.prepare();
  const double load_s = seconds_since(t0);

  const int32_t im_end = a.chat ? gen.tokenizer().id_of("<|im_end|>") : -1;
  TokenPrinter print(gen, as_ids);
  const size_t prompt_tokens = ids.size();
  double prompt_s = 0, decode_s = 0;
  int produced = 0;
  while (int64_t(ids.size()) < total) {
    auto t = clock::now();
    // Decode steps (every token after the first) for a profiler:
    // `ncu --nvtx --nvtx-include "rlx decode/"`.
    std::optional<ProfileRange> range;
    if (produced > 0) range.emplace("rlx decode");
    const int32_t next = gen.next_token(ids);
    const double step_s = seconds_since(t);
    range.reset();
    (produced == 0 ? prompt_s : decode_s) += step_s;
    if (trace) {
      // Host time: the step's wall time less the device's (launch, sync,
      // reading the token back; all of it on the CPU backend).
      const double dev_us = gen.last_device_us();
      if (dev_us >= 0)
        std::fprintf(stderr, "rlx decode: token %d id %d: step %.1f us, device %.1f us, host %.1f us\n", produced,
                     next, step_s * 1e6, dev_us, step_s * 1e6 - dev_us);
      else
        std::fprintf(stderr, "rlx decode: token %d id %d: step %.1f us (host; no device timer)\n", produced, next,
                     step_s * 1e6);
    }
    ++produced;
    if (!a.ignore_eos && (next == gen.eos_id() || (a.chat && next == im_end))) break;
    ids.push_back(next);
    print.add(next);
  }
  print.finish();
  std::fprintf(stderr, "rlx: load + compile %.2f s; prompt %zu tokens, %.1f tok/s; decode %d tokens, %.2f tok/s "
               "(%s, %s: %llu decode steps, %llu from device state)\n",
               load_s, prompt_tokens, prompt_s > 0 ? double(prompt_tokens) / prompt_s : 0.0,
               produced > 1 ? produced - 1 : 0, produced > 1 && decode_s > 0 ? double(produced - 1) / decode_s : 0.0,
               a.device.c_str(), a.recompute ? "full-prefix recompute" : "KV cache",
               static_cast<unsigned long long>(gen.decode_steps() + gen.device_steps()),
               static_cast<unsigned long long>(gen.device_steps()));
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto a = std::make_shared<GenerateArgs>();
  auto* cmd = app.add_subcommand("generate", "Generate text with a decoder (Llama, Mistral, Qwen2/3, Phi-3)");
  cmd->add_option("--model", a->model,
                  "a .gguf file, a directory holding one, or a Hugging Face directory (llama, mistral, qwen2, qwen3, "
                  "phi3) (default: models/" + std::string(kDefaultDecoderModel) + ")");
  cmd->add_option("--prompt", a->prompt, "the text to continue");
  cmd->add_option("--prompt-ids", a->prompt_ids,
                  "token ids to continue, comma-separated (prints ids; no tokenizer needed)");
  cmd->add_flag("--ignore-eos", a->ignore_eos, "do not stop at the end-of-sequence token: always -n tokens");
  cmd->add_option("-n", a->n, "most tokens to generate");
  cmd->add_option("--temperature", a->sampling.temperature, "0 = greedy (the default)");
  cmd->add_option("--top-k", a->sampling.top_k, "sample among the k most likely tokens (0 = all)");
  cmd->add_option("--top-p", a->sampling.top_p, "sample among the most likely tokens holding this probability");
  cmd->add_option("--seed", a->sampling.seed, "seed of the sampler");
  cmd->add_option("--device", a->device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  cmd->add_option("--dtype", a->dtype, "f32, f16 or bf16")->check(CLI::IsMember({"f32", "f16", "bf16"}));
  cmd->add_option("--threads", a->threads, "CPU threads (0 = all cores)");
  cmd->add_option("--quantize", a->quantize,
                  "q8_0 or q4_0: hold the matmul weights quantized (those a GGUF stores as Q8_0/Q4_0 always are)")
      ->check(CLI::IsMember({"q8_0", "q4_0"}));
  cmd->add_option("--batch", a->batch,
                  "decode B copies of the prompt at once (greedy; a benchmark: streams the first, decode tok/s "
                  "counts all B)");
  cmd->add_flag("--recompute", a->recompute, "no KV cache: recompute the whole prefix per token (a reference)");
  cmd->add_flag("--chat", a->chat, "wrap the prompt in the model's chat template (ChatML)");
  cmd->callback([a] { run_generate(*a); });
}
