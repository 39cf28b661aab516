#include "backends/cuda/attention_cudnn.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>
#include <unordered_map>

#include "backends/cuda/attention_mask.h"
#include "backends/cuda/cuda_check.h"

#ifdef RLX_HAVE_CUDNN
#include <cudnn_frontend.h>
#endif

namespace rlx::cuda {
namespace {

template <class T>
struct DeviceBuffer {
  T* ptr = nullptr;
  explicit DeviceBuffer(size_t bytes, const std::string& what) {
    if (bytes) check(cudaMalloc(reinterpret_cast<void**>(&ptr), bytes), what);
  }
  ~DeviceBuffer() { if (ptr) cudaFree(ptr); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

// The additive bias row per batch of one mask.
struct MaskBias {
  DeviceBuffer<uint8_t> bias;
  MaskBias(int64_t batch, int64_t skv, const std::string& label)
      : bias(size_t(batch * skv) * 2, "attention bias for " + label) {}
};

}  // namespace

struct MaskBiasShare {
  // (mask offset, batch, keys, dtype) -> the bias the first reader writes.
  std::map<std::tuple<uint64_t, int64_t, int64_t, int>, std::shared_ptr<MaskBias>> by_mask;
};

std::shared_ptr<MaskBiasShare> make_mask_bias_share() { return std::make_shared<MaskBiasShare>(); }

namespace {

std::atomic<int> g_cudnn_count{0}, g_own_count{0}, g_mask_bias_reused{0};

enum class Choice { Auto, Own, Cudnn };
Choice env_choice() {
  const char* e = std::getenv("RLX_ATTENTION");
  if (!e || !*e || !std::strcmp(e, "auto")) return Choice::Auto;
  if (!std::strcmp(e, "own")) return Choice::Own;
  if (!std::strcmp(e, "cudnn")) return Choice::Cudnn;
  throw Error(std::string("RLX_ATTENTION must be auto, own or cudnn, not '") + e + "'");
}

#ifdef RLX_HAVE_CUDNN
namespace fe = cudnn_frontend;

enum Uid : int64_t { kQ = 1, kK, kV, kO, kBias, kSeqQ, kSeqKv, kPageK, kPageV };

void check_fe(fe::error_t e, const std::string& what) {
  if (!e.is_good()) throw Error("cuDNN attention: " + what + ": " + e.get_message());
}

// One handle per device (a handle belongs to the device current when it
// was made), made on first use.
cudnnHandle_t cudnn_handle() {
  static std::mutex mu;
  static std::map<int, cudnnHandle_t> handles;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) throw Error("cuDNN: no current device");
  std::lock_guard<std::mutex> lock(mu);
  cudnnHandle_t& h = handles[device];
  if (!h) {
    const cudnnStatus_t s = cudnnCreate(&h);
    if (s != CUDNN_STATUS_SUCCESS) {
      h = nullptr;
      throw Error(std::string("cuDNN: cudnnCreate failed: ") + cudnnGetErrorString(s));
    }
  }
  return h;
}

size_t dtype_bytes(DType dt) { return dt == DType::F32 ? 4 : 2; }

// One built graph per distinct problem and device: layers of one model share it.
using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int,
                       int, float, int, bool, int64_t>;
Key key_of(const AttentionParams& p) {
  int device = 0;
  cudaGetDevice(&device);
  const bool cached = p.pos != kNoBuffer;
  return {p.batch, p.q_heads, p.kv_heads, p.sq, p.skv, p.head_dim, p.q_stride, p.k_stride, p.v_stride,
          int(p.dtype), int(p.mask_kind), p.scale, device, cached,
          cached && p.kv_slots != kNoBuffer ? p.kv_batch : -1};
}

// A KV cache's attention (query positions in the arena): per-sequence
// lengths with the causal diagonal at each sequence's bottom right, and a
// ragged batch's cache slots as page tables over the pool.
bool reads_cache(const AttentionParams& p) { return p.pos != kNoBuffer; }
bool reads_slots(const AttentionParams& p) { return reads_cache(p) && p.kv_slots != kNoBuffer; }
// cuDNN's pages are a power of two rows: a slot's cache is skv / page pages
// of the pool. The largest power of two up to 128 that divides skv, or 0
// where that is under 16 (pages of a few rows would be slow).
int64_t page_rows(int64_t skv) {
  int64_t page = 128;
  while (page >= 16 && skv % page != 0) page /= 2;
  return page >= 16 ? page : 0;
}

std::shared_ptr<fe::graph::Graph> build_graph(const AttentionParams& p, std::string& why) {
  const fe::DataType_t io = p.dtype == DType::F16 ? fe::DataType_t::HALF : fe::DataType_t::BFLOAT16;
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(io)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  const int64_t b = p.batch, hq = p.q_heads, hk = p.kv_heads, d = p.head_dim;
  // With cache slots, K and V are the pool as [slots * pages, H, page, D].
  const int64_t page = reads_slots(p) ? page_rows(p.skv) : p.skv, pages = p.skv / page;
  const int64_t kv_b = reads_slots(p) ? p.kv_batch * pages : b;
  // Rows of [B, S, heads * head_dim] (with a row stride) seen as [B, H, S, D].
  auto q = g->tensor(fe::graph::Tensor_attributes().set_name("Q").set_uid(kQ).set_dim({b, hq, p.sq, d})
                         .set_stride({p.sq * p.q_stride, d, p.q_stride, 1}));
  auto k = g->tensor(fe::graph::Tensor_attributes().set_name("K").set_uid(kK).set_dim({kv_b, hk, page, d})
                         .set_stride({page * p.k_stride, d, p.k_stride, 1}));
  auto v = g->tensor(fe::graph::Tensor_attributes().set_name("V").set_uid(kV).set_dim({kv_b, hk, page, d})
                         .set_stride({page * p.v_stride, d, p.v_stride, 1}));
  auto opts = fe::graph::SDPA_attributes().set_name("attention").set_generate_stats(false).set_attn_scale(
      p.scale);
  auto per_sequence = [&](const char* name, int64_t uid) {
    return g->tensor(fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_dim({b, 1, 1, 1})
                         .set_stride({1, 1, 1, 1}).set_data_type(fe::DataType_t::INT32));
  };
  if (reads_cache(p)) {
    opts.set_padding_mask(true)
        .set_seq_len_q(per_sequence("seq_len_q", kSeqQ))
        .set_seq_len_kv(per_sequence("seq_len_kv", kSeqKv))
        .set_causal_mask_bottom_right(true);
    if (reads_slots(p)) {
      auto table = [&](const char* name, int64_t uid) {
        return g->tensor(fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_dim({b, 1, pages, 1})
                             .set_stride({pages, pages, 1, 1}).set_data_type(fe::DataType_t::INT32));
      };
      opts.set_paged_attention_k_table(table("page_table_k", kPageK))
          .set_paged_attention_v_table(table("page_table_v", kPageV))
          .set_paged_attention_max_seq_len_kv(int(p.skv));
    }
  } else if (p.mask_kind == MaskKind::Causal) {
    // rlx's causal mask is aligned to the last key (decode rows see the whole prefix).
    if (p.sq == p.skv)
      opts.set_causal_mask(true);
    else
      opts.set_causal_mask_bottom_right(true);
  } else if (p.mask_kind == MaskKind::Padding) {
    auto bias = g->tensor(fe::graph::Tensor_attributes().set_name("bias").set_uid(kBias).set_dim({b, 1, 1, p.skv})
                              .set_stride({p.skv, p.skv, p.skv, 1}));
    opts.set_bias(bias);
  }
  auto [o, stats] = g->sdpa(q, k, v, opts);
  (void)stats;
  o->set_output(true).set_uid(kO).set_dim({b, hq, p.sq, d}).set_stride({p.sq * hq * d, d, hq * d, 1});
  cudnnHandle_t h = cudnn_handle();
  for (auto [e, what] : {std::pair{g->validate(), "validate"},
                         std::pair{g->build_operation_graph(h), "build_operation_graph"},
                         std::pair{g->create_execution_plans({fe::HeurMode_t::A}), "create_execution_plans"},
                         std::pair{g->check_support(h), "check_support"},
                         std::pair{g->build_plans(h), "build_plans"}}) {
    if (!e.is_good()) {
      why = std::string(what) + ": " + e.get_message();
      return nullptr;
    }
  }
  return g;
}

std::shared_ptr<fe::graph::Graph> cached_graph(const AttentionParams& p, std::string& why) {
  static std::mutex mu;
  static std::map<Key, std::pair<std::shared_ptr<fe::graph::Graph>, std::string>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(key_of(p));
  if (it == cache.end()) {
    std::string reason;
    auto g = build_graph(p, reason);
    it = cache.emplace(key_of(p), std::pair{g, reason}).first;
  }
  why = it->second.second;
  return it->second.first;
}


class CudnnAttentionThunk final : public DeviceThunk {
 public:
  CudnnAttentionThunk(const AttentionParams& p, std::shared_ptr<fe::graph::Graph> g, uint8_t* arena,
                      MaskBiasShare& share, const std::string& label)
      : p_(p), graph_(std::move(g)), label_(label),
        workspace_(size_t(workspace_size()), "cuDNN attention workspace for " + label) {
    const size_t es = dtype_bytes(p.dtype);
    q_ = arena + p.q + p.q_offset * es;
    k_ = arena + p.k + p.k_offset * es;
    v_ = arena + p.v + p.v_offset * es;
    o_ = arena + p.out;
    if (p.mask_kind == MaskKind::Padding) {
      // Thunks run in the order they are made, so the first reader of a
      // mask writes its bias before any later layer reads it.
      auto& slot = share.by_mask[{p.mask, p.batch, p.skv, int(p.dtype)}];
      writes_bias_ = !slot;
      if (!slot) slot = std::make_shared<MaskBias>(p.batch, p.skv, label);
      else ++g_mask_bias_reused;
      mask_ = slot;
      mb_ = MaskBiasParams{p.mask, reinterpret_cast<uint64_t>(mask_->bias.ptr), p.batch, p.skv, p.dtype};
    }
    if (reads_cache(p)) {
      const int64_t pages = reads_slots(p) ? p.skv / page_rows(p.skv) : 0;
      lens_ = std::make_unique<DeviceBuffer<int32_t>>(size_t(p.batch * (2 + pages)) * 4,
                                                      "attention lengths for " + label);
      cl_ = CacheLensParams{p.pos, p.kv_slots, reinterpret_cast<uint64_t>(lens_->ptr), p.out, p.batch, p.sq, p.skv,
                            p.kv_batch, pages, int64_t(p.q_heads) * p.head_dim, p.dtype};
    }
  }

  void execute(const LaunchContext& ctx) const override {
    if (writes_bias_) run_mask_bias(mb_, ctx);
    std::unordered_map<int64_t, void*> pack{{kQ, q_}, {kK, k_}, {kV, v_}, {kO, o_}};
    if (p_.mask_kind == MaskKind::Padding) pack.emplace(kBias, mask_->bias.ptr);
    if (lens_) {
      run_cache_lens(cl_, ctx);
      int32_t* lens = lens_->ptr;
      pack.emplace(kSeqQ, lens);
      pack.emplace(kSeqKv, lens + p_.batch);
      if (reads_slots(p_)) pack.emplace(kPageK, lens + 2 * p_.batch), pack.emplace(kPageV, lens + 2 * p_.batch);
    }
    cudnnHandle_t h = cudnn_handle();
    const cudnnStatus_t s = cudnnSetStream(h, ctx.stream);
    if (s != CUDNN_STATUS_SUCCESS)
      throw Error("cuDNN attention " + label_ + ": cudnnSetStream: " + cudnnGetErrorString(s));
    check_fe(graph_->execute(h, pack, workspace_.ptr), "execute for " + label_);
  }

 private:
  int64_t workspace_size() const {
    int64_t n = 0;
    check_fe(graph_->get_workspace_size(n), "workspace size for " + label_);
    return n;
  }

  AttentionParams p_;
  std::shared_ptr<fe::graph::Graph> graph_;
  std::string label_;
  DeviceBuffer<uint8_t> workspace_;
  std::shared_ptr<MaskBias> mask_;  // shared with the other layers reading this mask
  bool writes_bias_ = false;
  void *q_, *k_, *v_, *o_;
  MaskBiasParams mb_{};
  std::unique_ptr<DeviceBuffer<int32_t>> lens_;  // a KV cache's: seq_q, seq_kv, page tables
  CacheLensParams cl_{};
};

// What cuDNN's flash attention takes: f16/bf16, head_dim a multiple of 8 up
// to 256, 16-byte aligned rows.
std::string unsupported_reason(const AttentionParams& p, const uint8_t* arena) {
  if (p.dtype != DType::F16 && p.dtype != DType::BF16) return "dtype is not f16/bf16";
  if (p.q_rope_n_rot > 0) return "q is rotated inside the attention (a decode step)";
  if (reads_cache(p) && p.sq == 1) return "one query row over a KV cache (a decode step: rlx's decode kernel)";
  if (reads_cache(p) && p.mask_kind != MaskKind::Causal) return "a KV cache without the causal mask";
  if (reads_slots(p) && page_rows(p.skv) == 0) return "cache slots whose length has no power-of-two factor >= 16";
  if (p.ring) return "a ring cache (a sliding-window layer's)";
  // A causal window at least as long as the cache hides no key from a query
  // the cache holds (Mistral's 4096 over a 4096-token context): plain causal.
  if (p.window > 0 && !(reads_cache(p) && p.window >= p.skv)) return "a sliding window";
  if (p.softcap > 0.f) return "soft-capped scores";
  if (p.head_dim % 8 != 0 || p.head_dim > 256) return "head_dim is not a multiple of 8 up to 256";
  const size_t es = dtype_bytes(p.dtype);
  for (auto [base, off, stride] : {std::tuple{p.q, p.q_offset, p.q_stride}, std::tuple{p.k, p.k_offset, p.k_stride},
                                   std::tuple{p.v, p.v_offset, p.v_stride}, std::tuple{p.out, int64_t(0), int64_t(8)}}) {
    if ((reinterpret_cast<uintptr_t>(arena) + base + off * es) % 16 != 0 || stride % 8 != 0)
      return "rows are not 16-byte aligned";
  }
  return "";
}
#endif

}  // namespace

AttentionPathCounts attention_path_counts() {
  return {g_cudnn_count.load(), g_own_count.load(), g_mask_bias_reused.load()};
}
void count_own_attention() { ++g_own_count; }
bool cudnn_attention_built() {
#ifdef RLX_HAVE_CUDNN
  return true;
#else
  return false;
#endif
}

std::unique_ptr<DeviceThunk> make_cudnn_attention(const AttentionParams& p, const DeviceResources& r,
                                                  const std::string& label) {
  const Choice choice = env_choice();
  const char* trace = std::getenv("RLX_TRACE");
  [[maybe_unused]] const bool say = trace && std::strstr(trace, "attention");
  if (choice == Choice::Own || p.dtype == DType::F32) return nullptr;  // f32 stays on rlx's kernels
#ifdef RLX_HAVE_CUDNN
  std::string why = unsupported_reason(p, r.arena);
  std::shared_ptr<fe::graph::Graph> g;
  if (why.empty()) g = cached_graph(p, why);
  if (say) std::fprintf(stderr, "rlx attention: %s -> %s%s\n", label.c_str(), g ? "cudnn" : "own: ",
                        g ? "" : why.c_str());
  if (g) {
    ++g_cudnn_count;
    RLX_CHECK(r.mask_biases, "attention " + label + ": no mask-bias share in the device resources");
    return std::make_unique<CudnnAttentionThunk>(p, std::move(g), r.arena, *r.mask_biases, label);
  }
  if (choice == Choice::Cudnn) throw Error("attention " + label + ": RLX_ATTENTION=cudnn but cuDNN cannot serve it: " + why);
  return nullptr;
#else
  if (choice == Choice::Cudnn) throw Error("attention " + label + ": RLX_ATTENTION=cudnn but rlx was built without cuDNN");
  return nullptr;
#endif
}

}  // namespace rlx::cuda
