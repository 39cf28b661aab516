// `rlx rerank`: passages ordered by a cross-encoder's score for a query.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <numeric>

#include "rlx/embedder.h"
#include "rlx/error.h"
#include "tools/cli_inputs.h"
#include "tools/cli_options.h"
#include "tools/commands.h"
#include "tools/embedding_output.h"

namespace {
namespace fs = std::filesystem;

struct RerankArgs {
  std::string model, device = "auto", dtype = "f32", file, query, format = "json", prompt_name, prompt, recipe, quantize;
  bool raw = false, truncate = true, prompt_given = false;
  int batch = 32, threads = 0, max_length = 0, top = 0;
  std::vector<std::string> passages;
};

void run_rerank(const RerankArgs& a) {
  CliInputs in(a.passages, a.file);
  const std::vector<std::string> passages = read_all_inputs(in);
  RLX_CHECK(!passages.empty(), "nothing to rank: give passages, --file F, or - for stdin");
  RLX_CHECK(!a.model.empty(), "--model is required: a cross-encoder directory or Hub id "
                              "(e.g. cross-encoder/ms-marco-MiniLM-L6-v2)");
  rlx::EmbedderOptions o;
  o.threads = a.threads;
  o.dtype = dtype_option(a.dtype);
  o.int8_products = int8_option(a.quantize);
  o.device = device_option(a.device, o.int8_products);
  o.device_index = device_index_option(a.device);
  check_count("--batch", a.batch, 1, rlx::EmbedderOptions::kMaxBatch);
  o.max_batch = a.batch;
  check_count("--max-length", a.max_length, 0, 1 << 20);
  o.max_len = a.max_length;
  o.truncate = a.truncate;
  o.prompt_name = a.prompt_name;
  if (a.prompt_given) o.prompt = a.prompt;
  o.reranker_recipe = a.recipe;
  const std::string dir = rlx::resolve_model_dir(a.model);
  RLX_CHECK(fs::is_directory(dir), "--model '" << dir << "' is not a directory");
  rlx::Embedder model(dir, o);  // score() says why a model that is no cross-encoder cannot rank
  std::vector<float> scores = a.raw ? model.logits(a.query, passages) : model.score(a.query, passages);
  std::vector<size_t> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return scores[x] > scores[y]; });
  if (a.top > 0 && size_t(a.top) < order.size()) order.resize(size_t(a.top));
  if (a.format == "json") {
    nlohmann::json results = nlohmann::json::array();
    for (size_t i : order) results.push_back({{"index", i}, {"score", scores[i]}, {"text", passages[i]}});
    nlohmann::json doc = {{"query", a.query}, {"results", results}};
    std::cout << doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {  // compact: score, index, text per line
    for (size_t i : order) std::cout << json_number(scores[i]) << "\t" << i << "\t" << passages[i] << "\n";
  }
  if (size_t cut = model.truncated_texts())
    std::fprintf(stderr, "rlx rerank: warning: %zu of %zu pairs were longer than the model's %d tokens and "
                         "were truncated (--no-truncate makes that an error)\n",
                 cut, passages.size(), model.max_len());
}

}  // namespace

void add_rerank_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("rerank", "Passages ordered by a cross-encoder's score for a query");
  auto a = std::make_shared<RerankArgs>();
  cmd->add_option("passages", a->passages, "passages to rank ('-' reads lines from stdin)");
  cmd->add_option("--query,-q", a->query, "the query")->required();
  cmd->add_option("--model", a->model, "cross-encoder directory or Hub id in the Hugging Face cache");
  cmd->add_option("--file", a->file, "one passage per line ('-' = stdin)");
  cmd->add_option("--device", a->device, "auto, cpu, cuda or cuda:N (a GPU by index)")->check(device_choices());
  cmd->add_option("--dtype", a->dtype, "f32, f16 or bf16")->check(CLI::IsMember({"f32", "f16", "bf16"}));
  cmd->add_option("--quantize", a->quantize,
                  "int8: the products over weights in int8 on the CPU (weights per output column, activations per "
                  "token; AVX512-VNNI), with --dtype bf16 the fastest; scores within ~1e-2 of f32's")
      ->check(CLI::IsMember({"int8"}));
  cmd->add_option("--format", a->format, "json or compact")->check(CLI::IsMember({"json", "compact"}));
  cmd->add_option("--top", a->top, "print only the best N (0 = all)")->check(CLI::NonNegativeNumber);
  cmd->add_flag("--raw", a->raw, "the logits, without the model's activation (sigmoid)");
  cmd->add_option("--batch", a->batch, "largest batch per run (a power of two, at most 1024)");
  cmd->add_option("--max-length", a->max_length, "tokens per pair (0 = the model's)");
  cmd->add_flag("--truncate,!--no-truncate", a->truncate, "cut long pairs (the default) or refuse them");
  cmd->add_option("--threads", a->threads, "CPU threads (0 = physical cores)")->check(non_negative());
  cmd->add_option("--prompt-name", a->prompt_name,
                  "a causal-LM cross-encoder's prompt of config_sentence_transformers.json (its instruction)");
  auto* prompt = cmd->add_option("--prompt", a->prompt,
                                 "a causal-LM cross-encoder's instruction (overrides --prompt-name; \"\" = none)");
  cmd->add_option("--recipe", a->recipe,
                  "score a reranker published as a plain causal LM directory by its model card's recipe "
                  "(qwen3-reranker)");
  cmd->callback([a, prompt] {
    a->prompt_given = prompt->count() > 0;
    run_rerank(*a);
  });
}
