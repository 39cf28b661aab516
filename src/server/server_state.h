// What the routes of one server share: the models, their loops, metrics.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "rlx/embedder.h"
#include "rlx/llm.h"
#include "server/api_error.h"
#include "server/embedding_loop.h"
#include "server/generation_loop.h"
#include "server/metrics.h"
#include "server/server.h"

namespace rlx::server {

struct ServerState {
  ServeOptions options;
  // The decoder once per replica (--devices: each on its own GPU or GPUs),
  // each with its loop; `llm` is the first, whose tokenizer, template and
  // limits every replica shares (they load one model).
  std::vector<std::unique_ptr<LLM>> llms;
  std::vector<std::unique_ptr<GenerationLoop>> generations;
  std::vector<std::string> replica_devices;  // "cuda:0", "cuda:0,1", "cpu"
  LLM* llm = nullptr;
  // The embedding model once per device (GPU, or cpu entry of --devices),
  // each with its loop; `embedder` is the first (metadata, tokenizer).
  std::vector<std::unique_ptr<Embedder>> embedders;
  std::vector<std::unique_ptr<EmbeddingLoop>> embeddings;
  std::vector<std::string> embedder_devices;
  Embedder* embedder = nullptr;
  Metrics metrics;
  std::string llm_name, embedder_name;
  int64_t started_unix = 0;
  std::atomic<uint64_t> next_id{1};

  std::string new_id(const char* prefix);
  // The replica a new generation request goes to: the one with the fewest
  // requests running and waiting, ties taken in turn.
  GenerationLoop& pick_generation();
  std::atomic<uint64_t> next_replica{0};
  // The same for embedding requests; a rerank (scored on the HTTP thread)
  // takes the replicas in turn.
  EmbeddingLoop& pick_embedding();
  Embedder& next_embedder();
  std::atomic<uint64_t> next_embed_replica{0};
};

// Error bodies: OpenAI's shape, or TEI's ({"error", "error_type"}) on its routes.
enum class ErrorShape { OpenAI, Tei };

void send_json(httplib::Response& res, int status, const nlohmann::json& body);
void send_error(httplib::Response& res, const ApiError& e, ErrorShape shape);
// JSON text with invalid UTF-8 replaced, never an exception.
std::string dump_json(const nlohmann::json& j);

// A route's handler with the errors it throws turned into answers (ApiError
// as is, rlx::Error as 400, anything else 500) and counted in the metrics.
using RouteHandler = std::function<void(const httplib::Request&, httplib::Response&)>;
httplib::Server::Handler route(ServerState& s, const std::string& name, ErrorShape shape, RouteHandler h);

void add_openai_routes(httplib::Server& http, ServerState& s);
void add_tei_routes(httplib::Server& http, ServerState& s);

}  // namespace rlx::server
