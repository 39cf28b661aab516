// `rlx embed`: sentence embeddings from a Hugging Face BERT-family model.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "rlx/embedder.h"
#include "rlx/error.h"
#include "rlx/session.h"
#include "tools/cli_options.h"
#include "tools/commands.h"

namespace {
namespace fs = std::filesystem;

struct EmbedArgs {
  std::string model, device = "auto", dtype = "f32", file, format = "json";
  bool similarity = false, truncate = true;
  int batch = 32;
  int threads = 0;
  std::vector<std::string> sentences;
};

// $RLX_MODEL_DIR, then next to the installed binary, then the working directory.
std::string default_model_dir() {
  if (const char* env = std::getenv("RLX_MODEL_DIR"); env && *env) return env;
  std::vector<fs::path> tried;
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) tried.push_back(exe.parent_path() / ".." / "models" / "all-MiniLM-L6-v2");
  tried.push_back(fs::path("models") / "all-MiniLM-L6-v2");
  for (const auto& p : tried)
    if (fs::exists(p / "config.json")) return fs::weakly_canonical(p).string();
  std::string where;
  for (const auto& p : tried) where += " " + p.string();
  RLX_FAIL("no model directory found (looked in:" << where
                                                  << "); run scripts/setup, or pass --model DIR "
                                                     "or set RLX_MODEL_DIR");
}

std::vector<std::string> read_lines(std::istream& in) {
  std::vector<std::string> out;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

double cosine(const std::vector<float>& a, const std::vector<float>& b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ab += double(a[i]) * b[i];
    aa += double(a[i]) * a[i];
    bb += double(b[i]) * b[i];
  }
  return aa > 0 && bb > 0 ? ab / std::sqrt(aa * bb) : 0.0;
}

// Short decimal form that still round-trips closely enough for embeddings.
std::string num(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.7g", x);
  return buf;
}

std::string vec_json(const std::vector<float>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + num(v[i]);
  return s + "]";
}

void run_embed(const EmbedArgs& a) {
  std::vector<std::string> texts = a.sentences;
  if (!a.file.empty()) {
    if (a.file == "-") {
      auto more = read_lines(std::cin);
      texts.insert(texts.end(), more.begin(), more.end());
    } else {
      std::ifstream in(a.file);
      RLX_CHECK(in, "cannot open --file '" << a.file << "'");
      auto more = read_lines(in);
      texts.insert(texts.end(), more.begin(), more.end());
    }
  } else if (texts.size() == 1 && texts[0] == "-") {
    texts = read_lines(std::cin);
  }
  RLX_CHECK(!texts.empty(), "nothing to embed: give sentences, --file F, or - for stdin");
  RLX_CHECK(a.format == "json" || a.format == "compact",
            "--format must be json or compact, not '" << a.format << "'");

  rlx::EmbedderOptions o;
  o.threads = a.threads;
  o.dtype = dtype_option(a.dtype);
  o.device = device_option(a.device);
  check_count("--batch", a.batch, 1, rlx::EmbedderOptions::kMaxBatch);
  o.max_batch = a.batch;
  o.truncate = a.truncate;
  const std::string dir = a.model.empty() ? default_model_dir() : a.model;
  RLX_CHECK(fs::is_directory(dir), "--model '" << dir << "' is not a directory (expected a Hugging Face "
                                                   "model directory with config.json and model.safetensors)");
  rlx::Embedder embedder(dir, o);

  // Chunks of a few batches, so progress can be reported on big inputs.
  const size_t step = size_t(a.batch) * 8;
  const bool progress = texts.size() > step;
  const bool tty = isatty(fileno(stderr));  // a terminal redraws one line; logs get one line per step
  std::vector<std::vector<float>> emb;
  emb.reserve(texts.size());
  auto t0 = std::chrono::steady_clock::now();
  for (size_t i = 0; i < texts.size(); i += step) {
    std::vector<std::string> part(texts.begin() + long(i),
                                  texts.begin() + long(std::min(texts.size(), i + step)));
    auto got = embedder.embed(part);
    for (auto& v : got) emb.push_back(std::move(v));
    if (progress) std::fprintf(stderr, tty ? "\rrlx embed: %zu/%zu" : "rlx embed: %zu/%zu\n", emb.size(), texts.size());
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (progress && tty) std::fputc('\n', stderr);

  std::vector<std::vector<double>> sim;
  if (a.similarity) {
    sim.assign(emb.size(), std::vector<double>(emb.size()));
    for (size_t i = 0; i < emb.size(); ++i)
      for (size_t j = 0; j < emb.size(); ++j) sim[i][j] = cosine(emb[i], emb[j]);
  }

  if (a.format == "json") {
    std::cout << "{\n  \"model\": " << nlohmann::json(fs::path(dir).filename().string()).dump()
              << ",\n  \"dim\": " << embedder.dim() << ",\n  \"normalized\": "
              << (embedder.normalizes() ? "true" : "false") << ",\n  \"embeddings\": [\n";
    for (size_t i = 0; i < emb.size(); ++i)
      std::cout << "    {\"text\": " << nlohmann::json(texts[i]).dump(-1, ' ', false,
                                                                        nlohmann::json::error_handler_t::replace)
                << ", \"embedding\": " << vec_json(emb[i]) << "}" << (i + 1 < emb.size() ? "," : "")
                << "\n";
    std::cout << "  ]";
    if (a.similarity) {
      std::cout << ",\n  \"similarity\": [\n";
      for (size_t i = 0; i < sim.size(); ++i) {
        std::cout << "    [";
        for (size_t j = 0; j < sim.size(); ++j) std::cout << (j ? ", " : "") << num(sim[i][j]);
        std::cout << "]" << (i + 1 < sim.size() ? "," : "") << "\n";
      }
      std::cout << "  ]";
    }
    std::cout << "\n}\n";
  } else if (a.similarity) {  // compact: the similarity matrix, one row per line
    for (const auto& row : sim) {
      for (size_t j = 0; j < row.size(); ++j) {
        char buf[16];
        std::snprintf(buf, sizeof buf, "%s%.4f", j ? " " : "", row[j]);
        std::cout << buf;
      }
      std::cout << "\n";
    }
  } else {  // compact: one JSON array per line
    for (const auto& v : emb) std::cout << vec_json(v) << "\n";
  }
  if (size_t cut = embedder.truncated_texts())
    std::fprintf(stderr,
                 "rlx embed: warning: %zu of %zu sentences were longer than the model's %d tokens and "
                 "were truncated (--no-truncate makes that an error)\n",
                 cut, texts.size(), embedder.max_len());
  std::fprintf(stderr, "rlx embed: %zu sentences in %.3f s (%.1f sentences/s), %s, %s\n",
               texts.size(), secs, double(texts.size()) / std::max(secs, 1e-9),
               o.device == rlx::Device::Cuda ? "cuda" : "cpu", a.dtype.c_str());
}

}  // namespace

void add_embed_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("embed", "Sentence embeddings from a Hugging Face BERT-family model");
  auto a = std::make_shared<EmbedArgs>();
  cmd->add_option("sentences", a->sentences, "sentences to embed ('-' reads lines from stdin)");
  cmd->add_option("--model", a->model,
                  "model directory (default: $RLX_MODEL_DIR, else models/all-MiniLM-L6-v2 next to "
                  "the binary or in the working directory)");
  cmd->add_option("--device", a->device, "auto, cpu or cuda")->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  cmd->add_option("--dtype", a->dtype, "f32, f16 or bf16")->check(CLI::IsMember({"f32", "f16", "bf16"}));
  cmd->add_option("--file", a->file, "read one sentence per line from a file ('-' = stdin)");
  cmd->add_flag("--similarity", a->similarity, "also print the cosine similarity matrix");
  cmd->add_option("--format", a->format, "json or compact")->check(CLI::IsMember({"json", "compact"}));
  cmd->add_option("--batch", a->batch, "largest batch per run (a power of two, at most 1024)");
  cmd->add_flag("--truncate,!--no-truncate", a->truncate,
                "cut sentences longer than the model's limit, with a warning (the default); "
                "--no-truncate makes them an error");
  cmd->add_option("--threads", a->threads, "CPU threads (0 = physical cores)")->check(CLI::NonNegativeNumber);
  cmd->callback([a] { run_embed(*a); });
}
