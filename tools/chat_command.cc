// `rlx chat`: a conversation with a decoder model in its own chat template.
// Each line read is a user turn; the reply streams as it is produced. The
// conversation's tokens stay in its KV slot, so a turn runs only its own
// tokens (the stderr line after each reply says how many). /reset starts
// over, /exit (or the end of input) ends. Exit status 0, or 1 on an error.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <random>

#include "rlx/error.h"
#include "rlx/llm.h"
#include "tools/cli_options.h"
#include "tools/commands.h"

namespace {

struct ChatArgs {
  std::string model, device = "cpu", dtype = "f32", system;
  int n = 512, threads = 0;
  int64_t ctx = 4096;
  rlx::SamplingParams sampling;
  int64_t seed = -1;
};

void run_chat(const ChatArgs& a) {
  rlx::LlmOptions o;
  o.device = device_option(a.device);
  o.device_index = device_index_option(a.device);
  o.dtype = dtype_option(a.dtype);
  o.threads = a.threads;
  o.ctx_size = a.ctx;
  o.max_sequences = 1;
  rlx::SamplingParams sampling = a.sampling;
  rlx::check_sampling(sampling);
  RLX_CHECK(a.n >= 1, "-n must be >= 1");
  rlx::LLM llm(decoder_model_path(a.model), o);
  // One seed for the whole conversation, printed so that it can be repeated.
  const uint64_t seed = a.seed >= 0 ? uint64_t(a.seed) : (uint64_t(std::random_device{}()) << 32) ^ std::random_device{}();
  if (sampling.temperature > 0.f) std::fprintf(stderr, "rlx: seed %llu\n", (unsigned long long)seed);
  auto seq = llm.new_sequence();
  std::vector<rlx::ChatMessage> messages;
  if (!a.system.empty()) messages.push_back({"system", a.system});
  const bool tty = isatty(0);
  std::string line;
  int turn = 0;
  while (true) {
    if (tty) std::fputs("> ", stdout), std::fflush(stdout);
    if (!std::getline(std::cin, line) || line == "/exit") break;
    if (line == "/reset") {
      messages.resize(a.system.empty() ? 0 : 1);
      seq->truncate(0);
      std::fprintf(stderr, "rlx: conversation reset\n");
      continue;
    }
    if (line.empty()) continue;
    messages.push_back({"user", line});
    rlx::GenerateOptions g;
    g.max_tokens = a.n;
    g.sampling = sampling;
    g.sampling.seed = seed + uint64_t(turn++);
    const auto t0 = std::chrono::steady_clock::now();
    const rlx::Generation r = llm.chat(*seq, messages, g, [](const rlx::TextPiece& p) {
      std::fwrite(p.text.data(), 1, p.text.size(), stdout);
      std::fflush(stdout);
      return true;
    });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("\n");
    std::fflush(stdout);
    messages.push_back({"assistant", r.text});
    std::fprintf(stderr, "rlx: %zu tokens (%s), %lld prompt tokens run, %.1f tok/s; %lld of %lld context tokens used\n",
                 r.ids.size(), rlx::finish_reason_name(r.finish), (long long)r.prefilled_tokens,
                 s > 0 ? double(r.ids.size()) / s : 0.0, (long long)seq->tokens().size(), (long long)llm.ctx_size());
    if (r.context_full) {
      std::fprintf(stderr, "rlx: the context is full (%lld tokens, --ctx-size): /reset to start over\n",
                   (long long)llm.ctx_size());
    }
  }
}

}  // namespace

void add_chat_command(CLI::App& app) {
  auto a = std::make_shared<ChatArgs>();
  auto* cmd = app.add_subcommand("chat", "Talk with a decoder model in its chat template (a line per turn)");
  cmd->add_option("--model", a->model, "a .gguf file, a directory holding one, or a Hugging Face directory (default: models/" +
                                           std::string(kDefaultDecoderModel) + ")");
  cmd->add_option("--system", a->system, "a system message to begin with");
  cmd->add_option("-n", a->n, "most tokens per reply");
  cmd->add_option("--ctx-size", a->ctx, "tokens the conversation can hold");
  cmd->add_option("--temperature", a->sampling.temperature, "0 = greedy (the default)")->check(non_negative());
  cmd->add_option("--top-k", a->sampling.top_k, "sample among the k most likely tokens (0 = all)");
  cmd->add_option("--top-p", a->sampling.top_p, "sample among the most likely tokens holding this probability");
  cmd->add_option("--min-p", a->sampling.min_p, "drop tokens less likely than this times the most likely");
  cmd->add_option("--repeat-penalty", a->sampling.repeat_penalty, "llama.cpp's repetition penalty (1 = none)");
  cmd->add_option("--seed", a->seed, "seed of the sampler (default: random, printed)");
  cmd->add_option("--device", a->device, "cpu, cuda, cuda:N (a GPU by index) or auto")->check(device_choices());
  cmd->add_option("--dtype", a->dtype, "f32, f16 or bf16")->check(CLI::IsMember({"f32", "f16", "bf16"}));
  cmd->add_option("--threads", a->threads, "CPU threads (0 = all cores)")->check(non_negative());
  cmd->callback([a] { run_chat(*a); });
}
