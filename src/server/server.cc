#include "server/server.h"

#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <cstdio>
#include <ctime>
#include <filesystem>

#include "rlx/error.h"
#include "server/server_state.h"

namespace rlx::server {

using nlohmann::json;

namespace {

// The replica with the least load(), ties taken in turn (starting after the
// last pick).
template <class Loop, class Load>
Loop& least_loaded(const std::vector<std::unique_ptr<Loop>>& loops, std::atomic<uint64_t>& turn, Load load) {
  RLX_CHECK(!loops.empty(), "no model of this kind is served");
  const size_t n = loops.size(), first = size_t(turn.fetch_add(1) % n);
  size_t best = first, best_load = SIZE_MAX;
  for (size_t k = 0; k < n; ++k) {
    const size_t i = (first + k) % n;
    const size_t l = load(*loops[i]);
    if (l < best_load) best = i, best_load = l;
  }
  return *loops[best];
}

}  // namespace

GenerationLoop& ServerState::pick_generation() {
  return least_loaded(generations, next_replica, [](const GenerationLoop& g) { return g.running() + g.waiting(); });
}

EmbeddingLoop& ServerState::pick_embedding() {
  return least_loaded(embeddings, next_embed_replica, [](const EmbeddingLoop& e) { return e.load(); });
}

Embedder& ServerState::next_embedder() {
  RLX_CHECK(!embedders.empty(), "no embedding model is served");
  return *embedders[size_t(next_embed_replica.fetch_add(1) % embedders.size())];
}

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
    // The replicas: groups of tensor_parallel GPUs, or CPU replicas.
    const int tp = o.tensor_parallel;
    RLX_CHECK(tp >= 1, "--tensor-parallel must be at least 1");
    std::vector<std::vector<int>> groups;
    if (o.device == Device::Cuda) {
      std::vector<int> gpus = o.devices;
      if (gpus.empty())
        for (int r = 0; r < tp; ++r) gpus.push_back(o.device_index + r);
      RLX_CHECK(gpus.size() % size_t(tp) == 0, "--devices: " << gpus.size() << " GPUs do not make replicas of "
                                                             << tp << " (--tensor-parallel)");
      for (size_t i = 0; i < gpus.size(); i += size_t(tp))
        groups.emplace_back(gpus.begin() + std::ptrdiff_t(i), gpus.begin() + std::ptrdiff_t(i) + tp);
    } else {
      RLX_CHECK(o.devices.empty(), "--devices names GPUs; on the CPU give cpu entries");
      RLX_CHECK(o.cpu_replicas >= 1 && o.cpu_replicas <= 64, "--devices: 1 to 64 CPU replicas");
      groups.assign(size_t(o.cpu_replicas), {});
    }
    for (size_t i = 0; i < groups.size(); ++i) {
      std::string where = o.device == Device::Cuda ? "cuda:" : "cpu";
      for (size_t k = 0; k < groups[i].size(); ++k) where += (k ? "," : "") + std::to_string(groups[i][k]);
      std::fprintf(stderr, "rlx serve: loading %s (replica %zu of %zu, %s)\n", o.model.c_str(), i + 1, groups.size(),
                   where.c_str());
      LlmOptions lo;
      lo.device = o.device;
      lo.dtype = o.dtype;
      lo.threads = o.device == Device::Cpu && groups.size() > 1
                       ? std::max(1, (o.threads > 0 ? o.threads : int(std::thread::hardware_concurrency())) /
                                         int(groups.size()))
                       : o.threads;
      lo.ctx_size = o.ctx_size;
      lo.max_sequences = o.parallel;
      lo.prefill_chunk = o.prefill_chunk;
      lo.tensor_parallel = tp;
      if (!groups[i].empty()) {
        lo.device_index = groups[i][0];
        lo.devices = groups[i];
      }
      s.llms.push_back(std::make_unique<LLM>(o.model, lo));
      s.replica_devices.push_back(where);
      LLM& llm = *s.llms.back();
      if (o.prepare) {
        const auto t0 = std::chrono::steady_clock::now();
        llm.prepare();
        std::fprintf(stderr, "rlx serve: %s ready on %s (%s), %d graphs compiled in %.1f s\n",
                     o.model.c_str(), where.c_str(), llm.backend_summary().c_str(), llm.stats().compiled_graphs,
                     std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      }
      s.generations.push_back(std::make_unique<GenerationLoop>(llm, s.metrics, size_t(o.max_queue)));
    }
    s.llm = s.llms.front().get();
    s.llm_name = o.model_name.empty() ? name_of(o.model) : o.model_name;
  }
  if (!o.embedding_model.empty()) {
    // One replica per device: every GPU of --devices, or every cpu entry.
    std::vector<int> gpus = o.devices;
    if (o.device == Device::Cuda && gpus.empty()) gpus.push_back(o.device_index);
    const size_t replicas = o.device == Device::Cuda ? gpus.size() : size_t(o.cpu_replicas * o.tensor_parallel);
    for (size_t i = 0; i < replicas; ++i) {
      const std::string where = o.device == Device::Cuda ? "cuda:" + std::to_string(gpus[i]) : "cpu";
      std::fprintf(stderr, "rlx serve: loading %s (%s)\n", o.embedding_model.c_str(), where.c_str());
      EmbedderOptions eo;
      eo.device = o.device == Device::Auto ? Device::Cpu : o.device;
      eo.device_index = o.device == Device::Cuda ? gpus[i] : 0;
      eo.dtype = o.dtype;
      eo.threads = o.device == Device::Cpu && replicas > 1
                       ? std::max(1, (o.threads > 0 ? o.threads : int(std::thread::hardware_concurrency())) /
                                         int(replicas))
                       : o.threads;
      eo.max_batch = 128;
      eo.reranker_recipe = o.rerank_recipe;
      eo.int8_products = o.embedding_int8;
      s.embedders.push_back(std::make_unique<Embedder>(resolve_model_dir(o.embedding_model), eo));
      s.embedder_devices.push_back(where);
      s.embeddings.push_back(
          std::make_unique<EmbeddingLoop>(*s.embedders.back(), s.metrics, o.max_batch_tokens, size_t(o.max_queue)));
    }
    s.embedder = s.embedders.front().get();
    s.embedder_name = !o.embedding_model_name.empty() ? o.embedding_model_name
                      : is_hub_id(o.embedding_model) && !std::filesystem::exists(o.embedding_model) ? o.embedding_model
                                                                                                 : name_of(o.embedding_model);
  }
  RLX_CHECK(s.llm || s.embedder, "rlx serve needs --model, --embedding-model or both");
}

void add_gauges(ServerState& s) {
  Metrics& m = s.metrics;
  if (!s.generations.empty()) {
    auto sum = [&s](auto of) {
      return [&s, of] {
        double v = 0;
        for (const auto& g : s.generations) v += double(of(*g));
        return v;
      };
    };
    m.add_gauge("rlx_generation_queue_depth", "generation requests waiting for a KV slot",
                sum([](const GenerationLoop& g) { return g.waiting(); }));
    m.add_gauge("rlx_running_sequences", "generation requests running",
                sum([](const GenerationLoop& g) { return g.running(); }));
    m.add_gauge("rlx_kv_slots_held", "KV slots holding tokens (running or cached)",
                sum([](const GenerationLoop& g) { return g.slots_held(); }));
    const double slots = double(s.llm->max_sequences()) * double(s.generations.size()), ctx = double(s.llm->ctx_size());
    m.add_gauge("rlx_kv_slots", "KV slots in the pools (--parallel per replica)", [slots] { return slots; });
    auto cached = sum([](const GenerationLoop& g) { return g.cached_tokens(); });
    m.add_gauge("rlx_kv_pool_usage_ratio", "cached tokens over the pools' capacity",
                [cached, slots, ctx] { return cached() / (slots * ctx); });
    std::vector<Metrics::Sample> requests, running;
    for (size_t i = 0; i < s.generations.size(); ++i) {
      GenerationLoop* g = s.generations[i].get();
      const std::string labels = "replica=\"" + std::to_string(i) + "\",devices=\"" + s.replica_devices[i] + "\"";
      requests.push_back({labels, [g] { return double(g->submitted()); }});
      running.push_back({labels, [g] { return double(g->running()); }});
    }
    m.add_family("rlx_replica_requests_total", "generation requests each replica took", "counter", std::move(requests));
    m.add_family("rlx_replica_running_sequences", "generation requests running on each replica", "gauge",
                 std::move(running));
  }
  if (!s.embeddings.empty()) {
    m.add_gauge("rlx_embedding_queue_depth", "embedding requests waiting", [&s] {
      double n = 0;
      for (const auto& e : s.embeddings) n += double(e->waiting());
      return n;
    });
    std::vector<Metrics::Sample> requests;
    for (size_t i = 0; i < s.embeddings.size(); ++i) {
      EmbeddingLoop* e = s.embeddings[i].get();
      requests.push_back({"replica=\"" + std::to_string(i) + "\",devices=\"" + s.embedder_devices[i] + "\"",
                          [e] { return double(e->requests()); }});
    }
    m.add_family("rlx_embedding_replica_requests_total", "embedding requests each replica took", "counter",
                 std::move(requests));
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
    for (auto& g : s.generations) g->drain();
    for (auto& e : s.embeddings) e->drain();
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
