// POST /v1/chat/completions, /v1/completions, /v1/embeddings; GET /v1/models.
#include <chrono>
#include <cmath>
#include <ctime>

#include "rlx/error.h"
#include "server/base64.h"
#include "server/request_parse.h"
#include "server/server_state.h"

namespace rlx::server {
namespace {

using nlohmann::json;

void check_model(const std::string& asked, const std::string& served, const char* kind) {
  if (served.empty()) {
    throw ApiError{400, std::string("this server has no ") + kind + " model (start it with " +
                            (std::string(kind) == "embedding" ? "--embedding-model" : "--model") + ")",
                   "invalid_request_error", "model", "model_not_found"};
  }
  if (!asked.empty() && asked != served) {
    throw ApiError{404, "the model '" + asked + "' does not exist: this server's " + kind + " model is '" + served + "'",
                   "invalid_request_error", "model", "model_not_found"};
  }
}

const char* finish_name(const GenerationJob& job) {
  switch (job.result.finish) {
    case FinishReason::Length: return "length";
    default: return "stop";
  }
}

json usage(const GenerationJob& job) {
  const int64_t p = int64_t(job.prompt.size()), c = int64_t(job.result.ids.size());
  return {{"prompt_tokens", p}, {"completion_tokens", c}, {"total_tokens", p + c},
          {"prompt_tokens_details", {{"cached_tokens", job.cached_prompt_tokens}}}};
}

// The prompt's ids and the generation options, checked against the context.
std::shared_ptr<GenerationJob> start_job(ServerState& s, CompletionRequest& r) {
  check_model(r.model, s.llm_name, "text generation");
  LLM& llm = *s.llm;
  std::vector<int32_t> prompt;
  GenerateOptions o = r.gen;
  if (r.chat || !r.prompt_is_ids) {
    if (!llm.has_tokenizer()) {
      throw ApiError{400, "the model has no tokenizer (no tokenizer.json beside it): send the prompt as token ids",
                     "invalid_request_error", r.chat ? "messages" : "prompt", "no_tokenizer"};
    }
  }
  if (r.chat) {
    try {
      prompt = llm.chat_tokens(r.messages, true);
    } catch (const rlx::Error& e) {
      throw ApiError{400, e.what(), "invalid_request_error", "messages", "chat_template"};
    }
    o = llm.chat_options(o);
  } else if (r.prompt_is_ids) {
    for (size_t i = 0; i < r.prompt_ids.size(); ++i) {
      if (r.prompt_ids[i] >= llm.vocab_size()) {
        throw bad_field("prompt[" + std::to_string(i) + "]", "a token id below the vocabulary size " +
                                                                 std::to_string(llm.vocab_size()));
      }
    }
    prompt = r.prompt_ids;
  } else {
    // As llama-server does: the model's BOS, and control-token text in a raw prompt is the control token.
    prompt = llm.tokenizer().encode(r.prompt_text, true, true);
  }
  if (prompt.empty()) throw ApiError{400, "the prompt is empty", "invalid_request_error", "prompt", "empty_prompt"};
  const int64_t ctx = llm.ctx_size(), n = int64_t(prompt.size());
  if (n >= ctx || (r.max_tokens && n + *r.max_tokens > ctx)) {
    const int64_t m = r.max_tokens.value_or(1);
    throw ApiError{400, "this model's context is " + std::to_string(ctx) + " tokens (--ctx-size), but " +
                            std::to_string(n + m) + " were asked for (" + std::to_string(n) + " in the prompt, " +
                            std::to_string(m) + " for the completion)",
                   "invalid_request_error", r.chat ? "messages" : "prompt", "context_length_exceeded"};
  }
  o.max_tokens = int(r.max_tokens.value_or(ctx - n));
  try {
    check_sampling(o.sampling);
  } catch (const rlx::Error& e) {
    throw ApiError{400, e.what(), "invalid_request_error", "", "invalid_value"};
  }
  return s.pick_generation().submit(std::move(prompt), o, s.options.time_limit_s);
}

ApiError timeout_error(const ServerState& s) {
  return ApiError{504, "the request ran past the server's time limit of " + std::to_string(int(s.options.time_limit_s)) +
                           " s (--time-limit)", "server_error", "", "timeout"};
}

void send_completion(ServerState& s, const CompletionRequest& r, const std::shared_ptr<GenerationJob>& job,
                     httplib::Response& res) {
  const std::string id = s.new_id(r.chat ? "chatcmpl-" : "cmpl-");
  const int64_t created = int64_t(std::time(nullptr));
  if (!r.stream) {
    std::unique_lock<std::mutex> lock(job->m);
    job->cv.wait(lock, [&] { return job->finished; });
    if (!job->failure.empty()) throw ApiError{500, job->failure, "server_error", "", "internal_error"};
    if (job->timed_out) throw timeout_error(s);
    json choice = {{"index", 0}, {"finish_reason", finish_name(*job)}, {"logprobs", nullptr}};
    if (r.chat) choice["message"] = {{"role", "assistant"}, {"content", job->result.text}};
    else choice["text"] = job->result.text;
    send_json(res, 200, {{"id", id}, {"object", r.chat ? "chat.completion" : "text_completion"},
                         {"created", created}, {"model", s.llm_name}, {"system_fingerprint", std::string("rlx-") + version()},
                         {"choices", json::array({choice})}, {"usage", usage(*job)}});
    return;
  }
  // Server-sent events: a chunk per piece of text, the finish reason, usage
  // when asked for, then [DONE]. A failed write means the client has gone:
  // the job is cancelled and its slot freed at the next step.
  struct StreamState {
    bool started = false, ended = false;
  };
  auto st = std::make_shared<StreamState>();
  const bool chat = r.chat, include_usage = r.include_usage;
  const std::string model = s.llm_name;
  ServerState* sp = &s;
  auto chunk = [=](const json& delta_or_text, const json& finish) {
    json choice = {{"index", 0}, {"finish_reason", finish}, {"logprobs", nullptr}};
    if (chat) choice["delta"] = delta_or_text;
    else choice["text"] = delta_or_text;
    json c = {{"id", id}, {"object", chat ? "chat.completion.chunk" : "text_completion"}, {"created", created},
              {"model", model}, {"system_fingerprint", std::string("rlx-") + version()},
              {"choices", json::array({choice})}};
    return "data: " + dump_json(c) + "\n\n";
  };
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [=](size_t, httplib::DataSink& sink) {
        std::string out;
        if (!st->started) {
          st->started = true;
          if (chat) out += chunk(json{{"role", "assistant"}, {"content", ""}}, nullptr);
        }
        job->wait(Clock::now() + std::chrono::seconds(1));
        bool finished;
        {
          std::lock_guard<std::mutex> lock(job->m);
          for (const TextPiece& p : job->pieces) {
            if (!p.text.empty()) out += chunk(chat ? json{{"content", p.text}} : json(p.text), nullptr);
          }
          job->pieces.clear();
          finished = job->finished;
        }
        if (finished) {
          if (!job->failure.empty() || job->timed_out) {
            const ApiError e = job->failure.empty() ? timeout_error(*sp)
                                                    : ApiError{500, job->failure, "server_error", "", "internal_error"};
            out += "data: " + dump_json(e.body()) + "\n\n";
          } else {
            out += chunk(chat ? json::object() : json(""), finish_name(*job));
            if (include_usage) {
              json u = {{"id", id}, {"object", chat ? "chat.completion.chunk" : "text_completion"},
                        {"created", created}, {"model", model}, {"choices", json::array()}, {"usage", usage(*job)}};
              out += "data: " + dump_json(u) + "\n\n";
            }
          }
          out += "data: [DONE]\n\n";
        } else if (out.empty()) {
          out = ": waiting\n\n";  // a comment: keeps proxies from timing out, finds a client that left
        }
        if (!sink.write(out.data(), out.size())) {
          job->cancel = true;
          return false;
        }
        if (finished) {
          st->ended = true;
          sink.done();
        }
        return true;
      },
      [job, st](bool success) {
        if (!success || !st->ended) job->cancel = true;
      });
}

void embeddings(ServerState& s, const httplib::Request& req, httplib::Response& res) {
  EmbeddingRequest r = parse_embedding(parse_body(req.body));
  check_model(r.model, s.embedder_name, "embedding");
  if (s.embedder->is_cross_encoder()) {
    throw ApiError{400, "the model '" + s.embedder_name + "' is a cross-encoder: it scores pairs at /rerank, it does not embed",
                   "invalid_request_error", "model", "model_not_embedding"};
  }
  const std::vector<int64_t> counts = s.pick_embedding().token_counts(r.inputs);
  int64_t tokens = 0;
  for (int64_t c : counts) tokens += std::min<int64_t>(c, s.embedder->max_len());
  if (r.dimensions && *r.dimensions > s.embedder->dim()) {
    throw bad_field("dimensions", "at most the model's " + std::to_string(s.embedder->dim()));
  }
  std::vector<std::vector<float>> rows = s.pick_embedding().embed(r.inputs, tokens);
  json data = json::array();
  for (size_t i = 0; i < rows.size(); ++i) {
    std::vector<float>& v = rows[i];
    if (r.dimensions) {  // Matryoshka: the first n, renormalized when the model's output is
      v.resize(size_t(*r.dimensions));
      if (s.embedder->normalizes()) l2_normalize(v);
    }
    json e = {{"object", "embedding"}, {"index", i}};
    if (r.base64) e["embedding"] = base64_floats(v);
    else e["embedding"] = v;
    data.push_back(std::move(e));
  }
  send_json(res, 200, {{"object", "list"}, {"data", data}, {"model", s.embedder_name},
                       {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}});
}

}  // namespace

void add_openai_routes(httplib::Server& http, ServerState& s) {
  http.Get("/v1/models", route(s, "/v1/models", ErrorShape::OpenAI, [&s](const httplib::Request&, httplib::Response& res) {
    json data = json::array();
    for (const std::string& name : {s.llm_name, s.embedder_name}) {
      if (!name.empty()) data.push_back({{"id", name}, {"object", "model"}, {"created", s.started_unix}, {"owned_by", "rlx"}});
    }
    send_json(res, 200, {{"object", "list"}, {"data", data}});
  }));
  for (const bool chat : {true, false}) {
    const std::string path = chat ? "/v1/chat/completions" : "/v1/completions";
    http.Post(path, route(s, path, ErrorShape::OpenAI, [&s, chat](const httplib::Request& req, httplib::Response& res) {
      if (!s.llm) check_model("", "", "text generation");
      CompletionRequest r = parse_completion(parse_body(req.body), chat);
      send_completion(s, r, start_job(s, r), res);
    }));
  }
  http.Post("/v1/embeddings", route(s, "/v1/embeddings", ErrorShape::OpenAI,
                                    [&s](const httplib::Request& req, httplib::Response& res) {
                                      if (!s.embedder) check_model("", "", "embedding");
                                      embeddings(s, req, res);
                                    }));
}

}  // namespace rlx::server
