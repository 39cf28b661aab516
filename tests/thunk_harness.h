// Runs one hand-built thunk on a backend: tensors are placed at 256-aligned
// arena offsets and bound as inputs/outputs of a one-thunk schedule; outputs
// are poisoned with NaN in the arena before the run.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "test_util.h"

namespace rlx::test {

class ThunkHarness {
 public:
  // Places an input tensor; returns its arena offset for the params struct.
  uint64_t input(const std::string& name, DType dt, std::vector<uint8_t> bytes) {
    return place(name, dt, std::move(bytes), false);
  }
  uint64_t input_f32(const std::string& name, const std::vector<float>& v, DType dt) {
    return input(name, dt, to_bytes(v, dt));
  }
  uint64_t input_i32(const std::string& name, const std::vector<int32_t>& v) {
    return input(name, DType::I32, i32_bytes(v));
  }
  // Reserves an output of n elements; it is NaN-poisoned before the run.
  uint64_t output(const std::string& name, DType dt, size_t n) {
    return place(name, dt, std::vector<uint8_t>(n * dtype_size(dt)), true);
  }

  // Builds the schedule around params p, prepares it on backend and runs it.
  template <class P> void run(const P& p, Backend& backend, const std::string& label = "test") {
    Schedule s;
    Thunk t;
    t.params = p;
    t.label = label;
    for (const auto& tensor : tensors_) {
      Binding b;
      b.name = tensor.name;
      b.shape = {int64_t(tensor.bytes.size() / dtype_size(tensor.dtype))};
      b.dtype = tensor.dtype;
      b.offset = tensor.offset;
      b.inner_bytes = tensor.bytes.size();
      b.outer_stride_bytes = b.inner_bytes;
      t.uses.push_back({tensor.offset, tensor.bytes.size(), tensor.is_output});
      (tensor.is_output ? s.output_bindings : s.input_bindings).push_back(b);
    }
    s.thunks.push_back(t);
    s.arena_bytes = end_;
    auto exe = backend.prepare(s, CompileOptions{});
    std::vector<const void*> ins;
    std::vector<void*> outs;
    for (auto& tensor : tensors_) {
      if (tensor.is_output) {
        auto poison = nan_bytes(tensor.bytes.size() / dtype_size(tensor.dtype), tensor.dtype);
        exe->write_binding(s.output_bindings[outs.size()], poison.data());
        outs.push_back(tensor.bytes.data());
      } else {
        ins.push_back(tensor.bytes.data());
      }
    }
    exe->run(ins, outs);
  }

  const std::vector<uint8_t>& bytes(const std::string& name) const { return find(name).bytes; }
  std::vector<float> result(const std::string& name) const {
    const auto& t = find(name);
    return from_bytes(t.bytes, t.dtype);
  }

 private:
  struct Tensor {
    std::string name;
    DType dtype;
    std::vector<uint8_t> bytes;
    uint64_t offset;
    bool is_output;
  };

  uint64_t place(const std::string& name, DType dt, std::vector<uint8_t> bytes, bool is_output) {
    const uint64_t offset = end_;
    end_ = (offset + bytes.size() + 255) / 256 * 256 + 256;  // a gap keeps neighbours apart
    tensors_.push_back({name, dt, std::move(bytes), offset, is_output});
    return offset;
  }
  const Tensor& find(const std::string& name) const {
    for (const auto& t : tensors_)
      if (t.name == name) return t;
    throw std::runtime_error("no tensor named " + name);
  }

  std::vector<Tensor> tensors_;
  uint64_t end_ = 256;
};

}  // namespace rlx::test
