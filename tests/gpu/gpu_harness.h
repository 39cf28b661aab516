// Single-thunk (or few-thunk) schedules built by hand, run on the CUDA
// backend in a chosen mode, and checked against double-precision references.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/cuda/cuda_executable.h"
#include "reference_ops.h"
#include "rlx/dtype.h"
#include "test_util.h"

namespace rlx::gputest {

#define RLX_REQUIRE_GPU()                                                     \
  do {                                                                        \
    if (::rlx::cuda_backend() == nullptr)                                     \
      GTEST_SKIP() << "no CUDA device present: GPU tests skipped";            \
  } while (0)

enum class Role { Input, Output, Param };

struct Buf {
  std::string name;
  DType dtype;
  int64_t count;
  uint64_t offset;
  Role role;
  std::vector<uint8_t> host;  // inputs and params: the data; outputs: unused
};

inline const char* mode_name(ExecMode m) {
  switch (m) {
    case ExecMode::PerOp: return "perop";
    case ExecMode::Graph: return "graph";
    default: return "auto";
  }
}

class Case {
 public:
  explicit Case(uint32_t seed = 1234) : rng_(seed) {}

  uint64_t add(const std::string& name, DType dt, int64_t count, Role role) {
    uint64_t off = end_;
    end_ = (end_ + uint64_t(count) * dtype_size(dt) + 255) / 256 * 256;
    bufs_.push_back({name, dt, count, off, role, std::vector<uint8_t>(size_t(count) * dtype_size(dt))});
    return off;
  }
  Buf& buf(const std::string& name) {
    for (Buf& b : bufs_)
      if (b.name == name) return b;
    throw std::runtime_error("no buffer " + name);
  }
  void random(const std::string& name, float lo = -1.f, float hi = 1.f) {
    Buf& b = buf(name);
    std::uniform_real_distribution<float> d(lo, hi);
    for (int64_t i = 0; i < b.count; ++i) store_from_float(b.host.data(), b.dtype, size_t(i), d(rng_));
  }
  void set_i32(const std::string& name, const std::vector<int32_t>& v) {
    Buf& b = buf(name);
    std::memcpy(b.host.data(), v.data(), b.host.size());
  }
  double in(const std::string& name, int64_t i) {
    Buf& b = buf(name);
    if (b.dtype == DType::I32) return double(reinterpret_cast<const int32_t*>(b.host.data())[i]);
    return double(load_as_float(b.host.data(), b.dtype, size_t(i)));
  }
  void thunk(ThunkKind kind, ThunkParams p, std::string label, bool capture_safe = true) {
    Thunk t;
    t.params = p;
    if (t.kind() != kind) throw std::runtime_error(label + ": params of another thunk kind");
    t.label = std::move(label);
    t.capture_safe = capture_safe;
    thunks_.push_back(std::move(t));
  }

  Schedule schedule() const {
    Schedule s;
    s.thunks = thunks_;
    s.arena_bytes = end_ + 256;
    for (const Buf& b : bufs_) {
      Binding bd;
      bd.name = b.name;
      bd.shape = {b.count};
      bd.dtype = b.dtype;
      bd.offset = b.offset;
      bd.outer = 1;
      bd.inner_bytes = uint64_t(b.count) * dtype_size(b.dtype);
      (b.role == Role::Input ? s.input_bindings : b.role == Role::Output ? s.output_bindings : s.param_bindings)
          .push_back(bd);
    }
    return s;
  }

  std::unique_ptr<BackendExecutable> prepare(ExecMode mode, int ring = 4, const std::string& trace_json = "") {
    CompileOptions o;
    o.device = Device::Cuda;
    o.mode = mode;
    o.ring = ring;
    o.trace_json = trace_json;
    schedule_ = schedule();
    auto exe = cuda_backend()->prepare(schedule_, o);
    write_params(*exe);
    return exe;
  }
  void write_params(BackendExecutable& exe) {
    for (const Binding& b : schedule_.param_bindings) exe.write_binding(b, buf(b.name).host.data());
  }
  // Poison every output with NaN in the arena, run, return outputs as doubles.
  std::map<std::string, std::vector<double>> run(BackendExecutable& exe) {
    std::vector<const void*> ins;
    for (const Binding& b : schedule_.input_bindings) ins.push_back(buf(b.name).host.data());
    std::vector<std::vector<uint8_t>> outs;
    std::vector<void*> outp;
    for (const Binding& b : schedule_.output_bindings) {
      exe.write_binding(b, poison(b.dtype, b.bytes()).data());
      outs.emplace_back(b.bytes());
    }
    for (auto& o : outs) outp.push_back(o.data());
    exe.run(ins, outp);
    std::map<std::string, std::vector<double>> r;
    for (size_t i = 0; i < outs.size(); ++i) r[schedule_.output_bindings[i].name] = to_double(outs[i], schedule_.output_bindings[i].dtype);
    return r;
  }
  std::vector<const void*> input_ptrs() {
    std::vector<const void*> ins;
    for (const Binding& b : schedule_.input_bindings) ins.push_back(buf(b.name).host.data());
    return ins;
  }
  const Schedule& prepared_schedule() const { return schedule_; }

  static std::vector<uint8_t> poison(DType dt, size_t bytes) {
    std::vector<uint8_t> p(bytes, 0xff);  // NaN in f32, f16 and bf16; -1 in i32
    return p;
  }
  static std::vector<double> to_double(const std::vector<uint8_t>& bytes, DType dt) {
    std::vector<double> v(bytes.size() / dtype_size(dt));
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = dt == DType::I32 ? double(reinterpret_cast<const int32_t*>(bytes.data())[i])
                              : double(load_as_float(bytes.data(), dt, i));
    return v;
  }
  std::mt19937& rng() { return rng_; }

 private:
  std::mt19937 rng_;
  std::vector<Buf> bufs_;
  std::vector<Thunk> thunks_;
  uint64_t end_ = 256;  // offset 0 stays unused so a zero offset is never a valid buffer by accident
  Schedule schedule_;
};

// The tolerances, the element-wise comparison and the activation formulas
// are the shared ones (test_util.h, reference_ops.h), as the op-case table uses.
using test::expect_close;
using test::Tol;
using test::tol_for;
inline double act_ref(Activation a, double x) { return test::ref_activation(a, x); }

inline cuda::CudaExecutable& as_cuda(BackendExecutable& e) { return dynamic_cast<cuda::CudaExecutable&>(e); }

}  // namespace rlx::gputest
