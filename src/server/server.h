// `rlx serve`: one decoder and/or one embedding model behind OpenAI- and
// TEI-compatible HTTP routes (cpp-httplib). Runs until SIGINT/SIGTERM, then
// refuses new requests, finishes those running and returns.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "rlx/options.h"
#include "rlx/dtype.h"

namespace rlx::server {

struct ServeOptions {
  std::string model;            // decoder: .gguf or Hugging Face directory ("" = none)
  std::string embedding_model;  // Hugging Face BERT-family directory ("" = none)
  std::string rerank_recipe;    // embedding_model is a plain causal LM scored so (EmbedderOptions::reranker_recipe)
  bool embedding_int8 = false;  // the embedding model's products in int8 on the CPU (EmbedderOptions::int8_products)
  std::string model_name, embedding_model_name;  // ids in /v1/models ("" = from the path)
  std::string host = "127.0.0.1";
  int port = 8080;              // 0: any free port (printed)
  Device device = Device::Cpu;
  int device_index = 0;         // CUDA without `devices`: the GPU
  // The decoder runs as replicas, each over tensor_parallel GPUs of
  // `devices` taken in order (cuda: 0,1,2,3 with tensor_parallel 2 is two
  // replicas, on 0+1 and 2+3), or on the CPU as cpu_replicas replicas
  // (each of threads / cpu_replicas threads, split over tensor_parallel
  // host ranks). Requests go to the least loaded replica.
  std::vector<int> devices;
  int cpu_replicas = 1;
  int tensor_parallel = 1;
  DType dtype = DType::F32;
  int threads = 0;
  int64_t ctx_size = 4096;      // tokens per sequence
  int parallel = 8;             // sequences decoded together (KV slots)
  int64_t prefill_chunk = 512;
  int64_t max_batch_tokens = 16384;  // embedding tokens per dynamic batch
  int max_queue = 256;          // requests waiting beyond those running, per model
  double time_limit_s = 600;    // per request, 0 = none
  size_t max_body_bytes = 8u << 20;
  int http_threads = 256;       // connections served at once
  bool prepare = true;          // compile every graph before listening
  std::string api_key;          // when set, every route but /health needs "Authorization: Bearer <key>"
  // Called once listening, with the port (tests use it with port 0).
  std::function<void(int port)> on_listening;
};

// Loads the models, listens and serves until a stop signal; returns the
// process exit status.
int serve(const ServeOptions& o);

}  // namespace rlx::server
