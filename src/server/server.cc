#include "server/server.h"

#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>

#include "rlx/error.h"
#include "server/server_state.h"

namespace rlx::server {

using nlohmann::json;

std::string ServerState::new_id(const char* prefix) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%llx%06llx", (unsigned long long)started_unix,
                (unsigned long long)next_id.fetch_add(1));
  return prefix + std::string(buf);
}

std::string dump_json(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(dump_json(body), "application/json");
}

void send_error(httplib::Response& res, const ApiError& e, ErrorShape shape) {
  if (e.retry_after_s > 0) res.set_header("Retry-After", std::to_string(e.retry_after_s));
  if (shape == ErrorShape::OpenAI) {
    send_json(res, e.status, e.body());
  } else {
    send_json(res, e.status, {{"error", e.message}, {"error_type", e.type}});
  }
}

httplib::Server::Handler route(ServerState& s, const std::string& name, ErrorShape shape, RouteHandler h) {
  return [&s, name, shape, h](const httplib::Request& req, httplib::Response& res) {
    try {
      h(req, res);
    } catch (const ApiError& e) {
      send_error(res, e, shape);
    } catch (const rlx::Error& e) {
      send_error(res, ApiError{400, e.what(), "invalid_request_error", "", ""}, shape);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "rlx serve: %s %s: internal error: %s\n", req.method.c_str(), req.path.c_str(), e.what());
      send_error(res, ApiError{500, std::string("internal error: ") + e.what(), "server_error", "", "internal_error"},
                 shape);
    }
    s.metrics.request_done(name, res.status);
  };
}

namespace {

// Debian's cpp-httplib listens with a backlog of 5, so a burst of new
// connections (many clients at once) overflows the accept queue and some are
// reset; listen() again on the bound socket raises the backlog.
class Listener : public httplib::Server {
 public:
  void raise_backlog() { ::listen(svr_sock_, SOMAXCONN); }
};

int stop_pipe[2] = {-1, -1};

void on_stop_signal(int sig) {
  const unsigned char b = static_cast<unsigned char>(sig);
  (void)!write(stop_pipe[1], &b, 1);
}

std::string name_of(const std::string& path) {
  std::filesystem::path p(path);
  while (!p.empty() && p.filename().empty()) p = p.parent_path();  // "dir/" -> "dir"
  return std::filesystem::is_directory(p) ? p.filename().string() : p.stem().string();
}

void load_models(ServerState& s) {
  const ServeOptions& o = s.options;
  if (!o.model.empty()) {
    std::fprintf(stderr, "rlx serve: loading %s\n", o.model.c_str());
    LlmOptions lo;
    lo.device = o.device;
    lo.dtype = o.dtype;
    lo.threads = o.threads;
    lo.ctx_size = o.ctx_size;
    lo.max_sequences = o.parallel;
    lo.prefill_chunk = o.prefill_chunk;
    s.llm = std::make_unique<LLM>(o.model, lo);
    s.llm_name = o.model_name.empty() ? name_of(o.model) : o.model_name;
    if (o.prepare) {
      const auto t0 = std::chrono::steady_clock::now();
      s.llm->prepare();
      std::fprintf(stderr, "rlx serve: %s ready (%s), %d graphs compiled in %.1f s\n", s.llm_name.c_str(),
                   s.llm->backend_summary().c_str(), s.llm->stats().compiled_graphs,
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    s.generation = std::make_unique<GenerationLoop>(*s.llm, s.metrics, size_t(o.max_queue));
  }
  if (!o.embedding_model.empty()) {
    std::fprintf(stderr, "rlx serve: loading %s\n", o.embedding_model.c_str());
    EmbedderOptions eo;
    eo.device = o.device == Device::Auto ? Device::Cpu : o.device;
    eo.dtype = o.dtype;
    eo.threads = o.threads;
    eo.max_batch = 128;
    eo.reranker_recipe = o.rerank_recipe;
    eo.int8_products = o.embedding_int8;
    s.embedder = std::make_unique<Embedder>(resolve_model_dir(o.embedding_model), eo);
    s.embedder_name = !o.embedding_model_name.empty() ? o.embedding_model_name
                      : is_hub_id(o.embedding_model) && !std::filesystem::exists(o.embedding_model) ? o.embedding_model
                                                                                                 : name_of(o.embedding_model);
    s.embedding = std::make_unique<EmbeddingLoop>(*s.embedder, s.metrics, o.max_batch_tokens, size_t(o.max_queue));
  }
  RLX_CHECK(s.llm || s.embedder, "rlx serve needs --model, --embedding-model or both");
}

void add_gauges(ServerState& s) {
  Metrics& m = s.metrics;
  if (s.generation) {
    GenerationLoop* g = s.generation.get();
    m.add_gauge("rlx_generation_queue_depth", "generation requests waiting for a KV slot", [g] { return double(g->waiting()); });
    m.add_gauge("rlx_running_sequences", "generation requests running", [g] { return double(g->running()); });
    m.add_gauge("rlx_kv_slots_held", "KV slots holding tokens (running or cached)", [g] { return double(g->slots_held()); });
    const double slots = double(s.llm->max_sequences()), ctx = double(s.llm->ctx_size());
    m.add_gauge("rlx_kv_slots", "KV slots in the pool (--parallel)", [slots] { return slots; });
    m.add_gauge("rlx_kv_pool_usage_ratio", "cached tokens over the pool's capacity",
                [g, slots, ctx] { return double(g->cached_tokens()) / (slots * ctx); });
  }
  if (s.embedding) {
    EmbeddingLoop* e = s.embedding.get();
    m.add_gauge("rlx_embedding_queue_depth", "embedding requests waiting", [e] { return double(e->waiting()); });
  }
}

}  // namespace

int serve(const ServeOptions& o) {
  RLX_CHECK(o.parallel >= 1 && o.parallel <= 1024, "--parallel " << o.parallel << " must be in [1, 1024]");
  RLX_CHECK(o.max_queue >= 1, "--max-queue must be >= 1");
  RLX_CHECK(o.http_threads >= 2, "--http-threads must be >= 2");
  RLX_CHECK(o.max_batch_tokens >= 1, "--max-batch-tokens must be >= 1");
  RLX_CHECK(o.time_limit_s >= 0, "--time-limit must be >= 0");
  // A stop signal (on whichever thread it lands: the BLAS and OpenMP
  // threads predate any mask) only writes its number to a pipe; one thread
  // reads it and stops the server between requests. A client that vanishes
  // is a failed write, not SIGPIPE.
  RLX_CHECK(pipe(stop_pipe) == 0, "cannot make the stop pipe");
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);

  ServerState s;
  s.options = o;
  s.started_unix = int64_t(std::time(nullptr));
  load_models(s);
  add_gauges(s);

  Listener http;
  const int threads = o.http_threads;
  http.new_task_queue = [threads] { return new httplib::ThreadPool(size_t(threads)); };
  http.set_tcp_nodelay(true);  // a streamed token leaves at once
  http.set_payload_max_length(o.max_body_bytes);
  http.set_keep_alive_max_count(10000);
  http.set_read_timeout(30);
  http.set_write_timeout(10);
  http.set_error_handler([&s](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    ApiError e{res.status, "", "invalid_request_error", "", ""};
    if (res.status == 404) e.message = "no route " + req.method + " " + req.path, e.code = "not_found";
    else if (res.status == 413) e.message = "the request body is larger than the server's limit of " +
                                            std::to_string(s.options.max_body_bytes) + " bytes", e.code = "body_too_large";
    else if (res.status == 405) e.message = req.method + " is not allowed on " + req.path;
    else e.message = "HTTP " + std::to_string(res.status);
    const bool openai = req.path.rfind("/v1/", 0) == 0;
    send_error(res, e, openai ? ErrorShape::OpenAI : ErrorShape::Tei);
    s.metrics.request_done("other", res.status);
  });
  if (!o.api_key.empty()) {
    http.set_pre_routing_handler([&s](const httplib::Request& req, httplib::Response& res) {
      if (req.path == "/health" || req.get_header_value("Authorization") == "Bearer " + s.options.api_key) {
        return httplib::Server::HandlerResponse::Unhandled;
      }
      const bool openai = req.path.rfind("/v1/", 0) == 0;
      send_error(res, ApiError{401, "a valid API key is needed: send the header 'Authorization: Bearer <key>'",
                               "invalid_request_error", "", "invalid_api_key"},
                 openai ? ErrorShape::OpenAI : ErrorShape::Tei);
      s.metrics.request_done("unauthorized", 401);
      return httplib::Server::HandlerResponse::Handled;
    });
  }
  add_openai_routes(http, s);
  add_tei_routes(http, s);

  int port = o.port;
  if (port == 0) {
    port = http.bind_to_any_port(o.host);
    RLX_CHECK(port > 0, "cannot listen on " << o.host << " (any port)");
  } else {
    RLX_CHECK(http.bind_to_port(o.host, port), "cannot listen on " << o.host << ":" << port
                                                                    << " (in use, or not an address of this machine)");
  }
  http.raise_backlog();
  std::fprintf(stderr, "rlx serve: listening on http://%s:%d\n", o.host.c_str(), port);
  if (o.on_listening) o.on_listening(port);

  std::atomic<bool> stopping{false};
  std::thread stopper([&] {
    unsigned char sig = 0;
    while (read(stop_pipe[0], &sig, 1) < 0 && errno == EINTR) {}
    stopping = true;
    if (sig != 0) {
      std::fprintf(stderr, "rlx serve: %s: finishing running requests, refusing new ones\n",
                   sig == SIGINT ? "SIGINT" : "SIGTERM");
    }
    if (s.generation) s.generation->drain();
    if (s.embedding) s.embedding->drain();
    http.stop();
  });
  const bool listened = http.listen_after_bind();
  if (!stopping.load()) {  // the listener failed: end the waiter
    const unsigned char zero = 0;
    (void)!write(stop_pipe[1], &zero, 1);
  }
  stopper.join();
  RLX_CHECK(listened || stopping.load(), "the listener on " << o.host << ":" << port << " failed");
  std::fprintf(stderr, "rlx serve: stopped\n");
  return 0;
}

}  // namespace rlx::server
