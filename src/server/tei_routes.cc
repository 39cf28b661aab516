// Text Embeddings Inference's routes: POST /embed, /tokenize; GET /health,
// /info, /metrics.
#include <algorithm>

#include "rlx/error.h"
#include "server/request_parse.h"
#include "server/server_state.h"

namespace rlx::server {
namespace {

using nlohmann::json;

void require_embedder(const ServerState& s) {
  if (!s.embedder) {
    throw ApiError{400, "this server has no embedding model (start it with --embedding-model)", "Validation", "", ""};
  }
}

void require_embedding_model(const ServerState& s) {
  require_embedder(s);
  if (s.embedder->is_cross_encoder()) {
    throw ApiError{400, "this server's model '" + s.embedder_name + "' is a cross-encoder: it scores pairs at /rerank",
                   "Validation", "", ""};
  }
}

void embed(ServerState& s, const httplib::Request& req, httplib::Response& res) {
  require_embedding_model(s);
  TeiEmbedRequest r = parse_tei_embed(parse_body(req.body));
  const std::vector<int64_t> counts = s.pick_embedding().token_counts(r.inputs);
  int64_t tokens = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (!r.truncate && counts[i] > s.embedder->max_len()) {
      throw ApiError{413, "inputs[" + std::to_string(i) + "] has " + std::to_string(counts[i]) +
                              (counts[i] > s.embedder->max_len() + 2 ? "+" : "") + " tokens, more than the model's " +
                              std::to_string(s.embedder->max_len()) + ": send truncate=true to cut it",
                     "Validation", "inputs", ""};
    }
    tokens += std::min<int64_t>(counts[i], s.embedder->max_len());
  }
  if (!r.normalize && s.embedder->normalizes()) {
    throw ApiError{400, "normalize=false: this model's modules.json ends in a Normalize module, so its "
                        "embeddings are always normalized", "Validation", "normalize", ""};
  }
  std::vector<std::vector<float>> rows = s.pick_embedding().embed(r.inputs, tokens);
  if (r.normalize) {
    for (auto& v : rows) l2_normalize(v);
  }
  send_json(res, 200, rows);
}

void tokenize(ServerState& s, const httplib::Request& req, httplib::Response& res) {
  TokenizeRequest r = parse_tokenize(parse_body(req.body));
  json out = json::array();
  if (s.embedder) {
    const EmbeddingTokenizer& t = s.embedder->tokenizer();
    for (const std::string& text : r.inputs) {
      std::vector<int32_t> ids = t.encode(text, s.embedder->max_len()).ids;
      if (!r.add_special_tokens && ids.size() >= 2) ids = std::vector<int32_t>(ids.begin() + 1, ids.end() - 1);
      json toks = json::array();
      for (size_t i = 0; i < ids.size(); ++i) {
        const bool special = r.add_special_tokens && (i == 0 || i + 1 == ids.size());
        toks.push_back({{"id", ids[i]}, {"text", t.token_text(ids[i])}, {"special", special}});
      }
      out.push_back(toks);
    }
  } else if (s.llm && s.llm->has_tokenizer()) {
    const Tokenizer& t = s.llm->tokenizer();
    for (const std::string& text : r.inputs) {
      const std::vector<int32_t> ids = t.encode(text, r.add_special_tokens, false);
      json toks = json::array();
      for (int32_t id : ids) toks.push_back({{"id", id}, {"text", t.token_text(id)}, {"special", id == t.bos_id() || id == t.eos_id()}});
      out.push_back(toks);
    }
  } else {
    throw ApiError{400, "this server has no tokenizer to use", "Validation", "", ""};
  }
  send_json(res, 200, out);
}

// The request's prompt must be one the model takes: a 400 naming the field,
// before any pair is scored.
void check_rerank_prompt(const ServerState& s, const RerankRequest& r) {
  const char* field = r.prompt ? "prompt" : !r.prompt_name.empty() ? "prompt_name" : nullptr;
  if (!field) return;
  if (!s.embedder->info().pair_prompt) {
    throw ApiError{400, std::string("'") + field + "': this server's model '" + s.embedder_name +
                            "' is a sequence-classification cross-encoder, which takes no prompt (a causal-LM "
                            "cross-encoder such as Qwen3-Reranker takes one as its instruction)",
                   "Validation", field, ""};
  }
  if (r.prompt_name.empty()) return;
  try {
    s.embedder->prompt(r.prompt_name);
  } catch (const rlx::Error& e) {
    throw ApiError{400, std::string("'prompt_name': ") + e.what(), "Validation", "prompt_name", ""};
  }
}

// TEI's /rerank: one score per text against the query, best first.
void rerank(ServerState& s, const httplib::Request& req, httplib::Response& res) {
  require_embedder(s);
  if (!s.embedder->is_cross_encoder()) {
    throw ApiError{400, "this server's model '" + s.embedder_name + "' embeds; /rerank needs a cross-encoder "
                        "(a *ForSequenceClassification model, a causal LM with sentence-transformers' LogitScore module, or one "
                        "served with --rerank-recipe)", "Validation", "", ""};
  }
  RerankRequest r = parse_rerank(parse_body(req.body));
  EmbedCall call;
  call.prompt = r.prompt;
  call.prompt_name = r.prompt_name;
  check_rerank_prompt(s, r);
  const std::vector<float> scores =
      r.raw_scores ? s.next_embedder().logits(r.query, r.texts, call) : s.next_embedder().score(r.query, r.texts, call);
  std::vector<size_t> order(scores.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scores[a] > scores[b]; });
  json out = json::array();
  for (size_t i : order) {
    json e = {{"index", i}, {"score", scores[i]}};
    if (r.return_text) e["text"] = r.texts[i];
    out.push_back(std::move(e));
  }
  s.metrics.embedded_texts += r.texts.size();
  send_json(res, 200, out);
}

json info(const ServerState& s) {
  json j = {{"version", version()}, {"router", "rlx"},
            {"max_client_batch_size", 2048}, {"max_batch_tokens", s.options.max_batch_tokens},
            {"max_concurrent_requests", s.options.max_queue}};
  if (s.embedder) {
    j["model_id"] = s.embedder_name;
    if (s.embedder->is_cross_encoder()) {
      j["model_type"] = {{"reranker", {{"activation", s.embedder->info().score_activation}}}};
    } else {
      j["model_type"] = {{"embedding", {{"dim", s.embedder->dim()}, {"normalized", s.embedder->normalizes()},
                                        {"pooling", s.embedder->info().pooling}}}};
    }
    j["max_input_length"] = s.embedder->max_len();
    j["embedding_replicas"] = s.embedder_devices;
  }
  if (s.llm) {
    j["generation"] = {{"model_id", s.llm_name}, {"ctx_size", s.llm->ctx_size()},
                       {"parallel", s.llm->max_sequences()}, {"backend", s.llm->backend_summary()},
                       {"replicas", s.replica_devices}};
    if (!s.embedder) j["model_id"] = s.llm_name;
  }
  return j;
}

}  // namespace

void add_tei_routes(httplib::Server& http, ServerState& s) {
  http.Get("/health", route(s, "/health", ErrorShape::Tei, [](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, {{"status", "ok"}});
  }));
  http.Get("/info", route(s, "/info", ErrorShape::Tei, [&s](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, info(s));
  }));
  http.Get("/metrics", route(s, "/metrics", ErrorShape::Tei, [&s](const httplib::Request&, httplib::Response& res) {
    res.set_content(s.metrics.text(), "text/plain; version=0.0.4");
  }));
  http.Post("/embed", route(s, "/embed", ErrorShape::Tei, [&s](const httplib::Request& req, httplib::Response& res) {
    embed(s, req, res);
  }));
  http.Post("/rerank", route(s, "/rerank", ErrorShape::Tei, [&s](const httplib::Request& req, httplib::Response& res) {
    rerank(s, req, res);
  }));
  http.Post("/tokenize", route(s, "/tokenize", ErrorShape::Tei, [&s](const httplib::Request& req, httplib::Response& res) {
    tokenize(s, req, res);
  }));
}

}  // namespace rlx::server
