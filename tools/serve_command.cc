// `rlx serve`: the HTTP server (src/server/) with its options from the
// command line.
#include <algorithm>
#include <cstdlib>
#include <vector>

#include "rlx/error.h"
#include "tools/cli_options.h"
#include "tools/commands.h"
#ifdef RLX_HAVE_SERVER
#include "server/server.h"
#endif

namespace {

// --device as given agrees with the kind --devices names (the default cpu
// gives way to a list of GPUs).
bool cmd_device_unset_or(const std::string& device, const std::string& kind) {
  return device == "auto" || device == "cpu" || device.rfind(kind, 0) == 0;
}

struct ServeArgs {
  std::string model, embedding_model, model_name, embedding_model_name, host = "127.0.0.1", rerank_recipe,
      embedding_quantize;
  std::string device = "cpu", dtype = "f32", api_key, devices;
  int port = 8080, threads = 0, parallel = 8, max_queue = 256, http_threads = 256, tensor_parallel = 1;
  int64_t ctx = 4096, max_batch_tokens = 16384, prefill_chunk = 512;
  double time_limit = 600;
  size_t max_body_mb = 8;
  bool no_prepare = false;
};

}  // namespace

void add_serve_command(CLI::App& app) {
  auto a = std::make_shared<ServeArgs>();
  auto* cmd = app.add_subcommand("serve", "Serve a decoder and/or an embedding model over HTTP (OpenAI and TEI routes)");
  cmd->add_option("--model", a->model, "decoder: a .gguf file, a directory holding one, or a Hugging Face directory");
  cmd->add_option("--embedding-model", a->embedding_model, "a Hugging Face directory, cached Hub id or BERT/NomicBERT .gguf file: an embedding model, or a cross-encoder for /rerank");
  cmd->add_option("--rerank-recipe", a->rerank_recipe,
                  "the --embedding-model is a reranker published as a plain causal LM directory, scored by its "
                  "model card's recipe (qwen3-reranker)");
  cmd->add_option("--model-name", a->model_name, "the decoder's id in /v1/models (default: the file's name)");
  cmd->add_option("--embedding-model-name", a->embedding_model_name, "the embedding model's id (default: the directory's name)");
  cmd->add_option("--embedding-quantize", a->embedding_quantize,
                  "int8: the embedding model's products over weights in int8 on the CPU (weights per output column, "
                  "activations per token; AVX512-VNNI), with --dtype bf16 the fastest; within ~1e-2 of f32's")
      ->check(CLI::IsMember({"int8"}));
  cmd->add_option("--host", a->host, "address to listen on");
  cmd->add_option("--port", a->port, "port to listen on (0: any free port)")->check(CLI::Range(0, 65535));
  cmd->add_option("--device", a->device, "cpu, cuda, cuda:N (a GPU by index) or auto")->check(device_choices());
  cmd->add_option("--devices", a->devices,
                  "the decoder on several GPUs (0,1,2,3): one replica per --tensor-parallel GPUs, each request to "
                  "the least loaded; cpu,cpu: CPU replicas");
  cmd->add_option("--tensor-parallel", a->tensor_parallel,
                  "split each decoder replica over N GPUs (or N host ranks on the CPU) by heads and FFN rows")
      ->check(CLI::Range(1, 64));
  cmd->add_option("--dtype", a->dtype, "f32, f16 or bf16")->check(CLI::IsMember({"f32", "f16", "bf16"}));
  cmd->add_option("--threads", a->threads, "CPU threads (0 = all cores)")->check(non_negative());
  cmd->add_option("--ctx-size", a->ctx, "tokens each sequence can hold (prompt and reply)");
  cmd->add_option("--parallel", a->parallel, "sequences decoded together (KV slots)");
  cmd->add_option("--prefill-chunk", a->prefill_chunk, "most prompt tokens prefilled in one step");
  cmd->add_option("--max-batch-tokens", a->max_batch_tokens, "embedding tokens gathered into one batch");
  cmd->add_option("--max-queue", a->max_queue, "requests waiting per model beyond those running; more get 503");
  cmd->add_option("--time-limit", a->time_limit, "seconds a request may take (0 = none)");
  cmd->add_option("--max-body-mb", a->max_body_mb, "largest request body, in MiB");
  cmd->add_option("--http-threads", a->http_threads, "connections served at once");
  cmd->add_option("--api-key", a->api_key, "require 'Authorization: Bearer KEY' (default: RLX_API_KEY, else none)");
  cmd->add_flag("--no-prepare", a->no_prepare, "compile graphs on first use instead of before listening");
  cmd->callback([a] {
#ifdef RLX_HAVE_SERVER
    rlx::server::ServeOptions o;
    RLX_CHECK(!a->model.empty() || !a->embedding_model.empty(), "rlx serve needs --model, --embedding-model or both");
    if (!a->model.empty()) o.model = decoder_model_path(a->model);
    o.embedding_model = a->embedding_model;
    RLX_CHECK(a->rerank_recipe.empty() || !a->embedding_model.empty(), "--rerank-recipe needs --embedding-model");
    o.rerank_recipe = a->rerank_recipe;
    RLX_CHECK(a->embedding_quantize.empty() || !a->embedding_model.empty(), "--embedding-quantize needs --embedding-model");
    o.embedding_int8 = int8_option(a->embedding_quantize);
    o.model_name = a->model_name;
    o.embedding_model_name = a->embedding_model_name;
    o.host = a->host;
    o.port = a->port;
    o.device = device_option(a->device);
    o.device_index = device_index_option(a->device);
    o.tensor_parallel = a->tensor_parallel;
    if (!a->devices.empty()) {
      // A list of GPU indices (N or cuda:N), or of cpu entries (CPU replicas).
      int cpus = 0;
      std::vector<int> gpus;
      for (const std::string& e : split_list(a->devices)) {
        if (e == "cpu") ++cpus;
        else gpus.push_back(gpu_index_option("--devices", e));
      }
      RLX_CHECK(cpus == 0 || gpus.empty(), "--devices mixes cpu and GPUs: give one kind");
      RLX_CHECK(cmd_device_unset_or(a->device, gpus.empty() ? "cpu" : "cuda"),
                "--devices " << a->devices << " does not run on --device " << a->device);
      if (gpus.empty()) {
        RLX_CHECK(cpus % a->tensor_parallel == 0, "--devices: " << cpus << " cpu entries do not make replicas of "
                                                                 << a->tensor_parallel << " (--tensor-parallel)");
        o.device = rlx::Device::Cpu;
        o.cpu_replicas = cpus / a->tensor_parallel;
      } else {
        o.device = device_option("cuda");
        o.devices = gpus;
      }
    }
    o.dtype = dtype_option(a->dtype);
    o.threads = a->threads;
    o.ctx_size = a->ctx;
    o.parallel = a->parallel;
    o.prefill_chunk = a->prefill_chunk;
    o.max_batch_tokens = a->max_batch_tokens;
    o.max_queue = a->max_queue;
    o.time_limit_s = a->time_limit;
    RLX_CHECK(a->max_body_mb >= 1 && a->max_body_mb <= 1024, "--max-body-mb must be in [1, 1024]");
    o.max_body_bytes = a->max_body_mb << 20;
    o.http_threads = a->http_threads;
    o.prepare = !a->no_prepare;
    o.api_key = a->api_key;
    if (o.api_key.empty() && std::getenv("RLX_API_KEY")) o.api_key = std::getenv("RLX_API_KEY");
    const int rc = rlx::server::serve(o);
    if (rc != 0) std::exit(rc);
#else
    RLX_FAIL("this rlx was built without the HTTP server (cpp-httplib was not found: run scripts/setup)");
#endif
  });
}
