// `rlx embed`: sentence embeddings from a Hugging Face BERT-family model.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "rlx/embedder.h"
#include "rlx/error.h"
#include "rlx/session.h"
#include "tools/cli_inputs.h"
#include "tools/cli_options.h"
#include "tools/commands.h"
#include "tools/embedding_output.h"

namespace {
namespace fs = std::filesystem;

struct EmbedArgs {
  std::string model, device = "auto", dtype = "f32", file, format, output;
  std::string pooling = "model", prompt_name, quantize;
  std::string prompt;
  bool prompt_given = false, normalize = false, no_normalize = false;
  bool similarity = false, truncate = true;
  int batch = 32, threads = 0, max_length = 0, dimensions = 0;
  std::vector<std::string> sentences;
};

double cosine(const std::vector<float>& a, const std::vector<float>& b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ab += double(a[i]) * b[i];
    aa += double(a[i]) * a[i];
    bb += double(b[i]) * b[i];
  }
  return aa > 0 && bb > 0 ? ab / std::sqrt(aa * bb) : 0.0;
}

rlx::PoolingMode pooling_option(const std::string& s) {
  if (s == "model") return rlx::PoolingMode::Model;
  if (s == "mean") return rlx::PoolingMode::Mean;
  if (s == "cls") return rlx::PoolingMode::Cls;
  if (s == "max") return rlx::PoolingMode::Max;
  if (s == "mean_sqrt_len") return rlx::PoolingMode::MeanSqrtLen;
  if (s == "weightedmean") return rlx::PoolingMode::WeightedMean;
  if (s == "lasttoken") return rlx::PoolingMode::LastToken;
  RLX_FAIL("--pooling must be model, mean, cls, max, mean_sqrt_len, weightedmean or lasttoken, not '" << s << "'");
}

// Names the first few inputs of a list, by where they came from.
std::string first_few(const CliInputs& in, const std::vector<size_t>& rows) {
  std::string s;
  for (size_t k = 0; k < rows.size() && k < 5; ++k) s += (k ? ", " : "") + in.where(rows[k]);
  if (rows.size() > 5) s += ", ...";
  return s;
}

void run_embed(const EmbedArgs& a) {
  CliInputs in(a.sentences, a.file);
  // Chunks of a few batches: rows go out as each completes and lines are
  // read as they are needed, so memory does not grow with the input (except
  // for --similarity, which needs every row).
  const size_t step = size_t(std::max(a.batch, 1)) * 8;
  std::vector<std::string> part;
  RLX_CHECK(in.next(part, step), "nothing to embed: give sentences, --file F, or - for stdin");
  // A person at a terminal gets the table; a pipe or a file gets JSON.
  const std::string format = !a.format.empty()                            ? a.format
                             : a.output.empty() && isatty(fileno(stdout)) ? "table"
                                                                          : "json";
  RLX_CHECK(!a.similarity || format != "jsonl", "--similarity needs --format json, compact or table, not jsonl");

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
  check_count("--dimensions", a.dimensions, 0, 1 << 20);
  o.truncate_dim = a.dimensions;
  o.pooling = pooling_option(a.pooling);
  RLX_CHECK(!(a.normalize && a.no_normalize), "give --normalize or --no-normalize, not both");
  if (a.normalize) o.normalize = rlx::NormalizeMode::On;
  if (a.no_normalize) o.normalize = rlx::NormalizeMode::Off;
  o.prompt_name = a.prompt_name;
  if (a.prompt_given) o.prompt = a.prompt;
  // The CLI checks truncation itself, to name the line and keep the rows before it.
  o.truncate = true;
  const std::string dir = a.model.empty() ? default_embed_model_dir() : rlx::resolve_model_dir(a.model);
  RLX_CHECK(fs::is_directory(dir) || fs::is_regular_file(dir),
            "--model '" << dir << "' is not a directory (expected a Hugging Face model directory with config.json "
                                  "and model.safetensors, a BERT .gguf file, or a Hub id such as "
                                  "sentence-transformers/all-MiniLM-L6-v2)");
  rlx::Embedder embedder(dir, o);
  RLX_CHECK(!embedder.is_cross_encoder(), "--model '" << dir << "' is a cross-encoder ("
                                                      << embedder.info().architecture
                                                      << "): it scores pairs, use `rlx rerank`");

  EmbeddingHeader h{fs::path(dir).filename().string(), embedder.dim(), embedder.normalizes(), a.similarity};
  // A Hub snapshot's folder is a commit hash: name the model by its id.
  if (!fs::is_directory(a.model) && rlx::is_hub_id(a.model)) h.model = a.model;
  auto out = make_embedding_output(format, a.output, h, std::cout);

  const bool tty = isatty(fileno(stderr));  // a terminal redraws one line; logs get one line per step
  bool progress = false;
  std::vector<std::vector<float>> kept;
  std::vector<size_t> cut;
  size_t done = 0;
  auto t0 = std::chrono::steady_clock::now();
  for (bool more = true; more; more = in.next(part, step)) {
    const size_t i = done;
    std::vector<uint8_t> truncated;
    rlx::EmbedCall call;
    call.truncated = &truncated;
    auto got = embedder.embed(part, call);
    for (size_t r = 0; r < got.size(); ++r) {
      if (truncated[r] && !a.truncate) {
        out->finish({});
        if (progress && tty) std::fputc('\n', stderr);
        RLX_FAIL(in.where(i + r) << " is longer than the model's " << embedder.max_len()
                                 << " tokens (--no-truncate); the " << done
                                 << " rows before it were written");
      }
      if (truncated[r]) cut.push_back(i + r);
      out->row(i + r, part[r], got[r]);
      if (a.similarity) kept.push_back(std::move(got[r]));
      ++done;
    }
    progress |= done >= step;  // more than one chunk: report each
    if (progress) std::fprintf(stderr, tty ? "\rrlx embed: %zu" : "rlx embed: %zu\n", done);
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (progress && tty) std::fputc('\n', stderr);

  std::vector<std::vector<double>> sim;
  if (a.similarity) {
    sim.assign(kept.size(), std::vector<double>(kept.size()));
    for (size_t i = 0; i < kept.size(); ++i)
      for (size_t j = 0; j < kept.size(); ++j) sim[i][j] = cosine(kept[i], kept[j]);
  }
  out->finish(sim);
  if (!cut.empty())
    std::fprintf(stderr,
                 "rlx embed: warning: %zu of %zu sentences were longer than the model's %d tokens and "
                 "were truncated: %s (--no-truncate makes that an error)\n",
                 cut.size(), done, embedder.max_len(), first_few(in, cut).c_str());
  std::fprintf(stderr, "rlx embed: %zu sentences in %.3f s (%.1f sentences/s), %s, %s\n",
               done, secs, double(done) / std::max(secs, 1e-9),
               o.device == rlx::Device::Cuda ? "cuda" : "cpu", a.dtype.c_str());
}

}  // namespace

void add_embed_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("embed", "Sentence embeddings from a Hugging Face BERT-family model");
  auto a = std::make_shared<EmbedArgs>();
  cmd->add_option("sentences", a->sentences, "sentences to embed ('-' reads lines from stdin)");
  cmd->add_option("--model", a->model,
                  "model directory, BERT .gguf file (llama.cpp's converter) or Hub id in the Hugging Face "
                  "cache (default: $RLX_MODEL_DIR, else "
                  "models/all-MiniLM-L6-v2 next to the binary or in the working directory)");
  cmd->add_option("--device", a->device, "auto, cpu, cuda or cuda:N (a GPU by index)")->check(device_choices());
  cmd->add_option("--dtype", a->dtype, "f32, f16 or bf16")->check(CLI::IsMember({"f32", "f16", "bf16"}));
  cmd->add_option("--quantize", a->quantize, kQuantizeInt8Help)->check(CLI::IsMember({"int8"}));
  cmd->add_option("--file", a->file, "read one sentence per line from a file ('-' = stdin); one row per line, "
                                     "blank lines included");
  cmd->add_flag("--similarity", a->similarity, "also print the cosine similarity matrix");
  cmd->add_option("--format", a->format,
                  "json, jsonl, compact or table (rows and the similarity matrix labelled by each text's first "
                  "words; the default on a terminal, json otherwise)")
      ->check(CLI::IsMember({"json", "jsonl", "compact", "table"}));
  cmd->add_option("--output,-o", a->output, "write to a file instead of stdout; F.npy writes NumPy's format "
                                            "(float32 [n, dim])");
  cmd->add_option("--batch", a->batch, "largest batch per run (a power of two, at most 1024)");
  cmd->add_option("--max-length", a->max_length, "tokens per sentence, [CLS]/[SEP] included (0 = the model's)");
  cmd->add_flag("--truncate,!--no-truncate", a->truncate,
                "cut sentences longer than the model's limit, with a warning (the default); "
                "--no-truncate makes them an error");
  cmd->add_option("--pooling", a->pooling,
                  "model (from 1_Pooling/config.json), mean, cls, max, mean_sqrt_len, weightedmean or lasttoken");
  cmd->add_flag("--normalize", a->normalize,
                "L2-normalize (default: when the model's modules.json ends in a Normalize module)");
  cmd->add_flag("--no-normalize", a->no_normalize, "do not normalize, even where the model would");
  cmd->add_option("--dimensions", a->dimensions, "keep the first N values (Matryoshka), then normalize if normalizing");
  cmd->add_option("--prompt-name", a->prompt_name, "a prompt of config_sentence_transformers.json, e.g. query");
  auto* prompt = cmd->add_option("--prompt", a->prompt,
                                 "text put before every sentence (overrides --prompt-name; \"\" = none)");
  cmd->add_option("--threads", a->threads, "CPU threads (0 = physical cores)")->check(non_negative());
  cmd->callback([a, prompt] {
    a->prompt_given = prompt->count() > 0;
    run_embed(*a);
  });
}
