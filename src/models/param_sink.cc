#include "models/param_sink.h"

#include <cstring>

#include "rlx/error.h"

namespace rlx {

std::vector<uint8_t> slice_for_rank(const std::string& name, const void* data, size_t elem_bytes, const Shape& shape,
                                    const ParamSlice& slice, TpRank tp, Shape* out_shape) {
  RLX_CHECK(!shape.empty(), "tensor parallelism: tensor '" << name << "' is a scalar and cannot be split");
  RLX_CHECK(slice.axis(shape.size()) < shape.size(),
            "tensor parallelism: tensor '" << name << "' " << shape_str(shape) << " has no dim " << slice.dim);
  const size_t axis = slice.axis(shape.size());
  const int64_t len = shape[axis];
  std::vector<int64_t> parts = slice.parts.empty() ? std::vector<int64_t>{len} : slice.parts;
  int64_t sum = 0, local = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const int64_t p = parts[i];
    const int pieces = slice.pieces_of(i, tp.ranks);
    RLX_CHECK(p > 0 && pieces > 0 && tp.ranks % pieces == 0 && p % pieces == 0,
              "tensor parallelism over " << tp.ranks << " ranks: tensor '" << name << "' " << shape_str(shape)
                                         << " has a part of " << p << " along dim " << axis
                                         << ", which does not split evenly");
    sum += p;
    local += p / pieces;
  }
  RLX_CHECK(sum == len, "tensor parallelism: tensor '" << name << "' " << shape_str(shape) << " is not the parts "
                                                       << "the model expects along dim " << axis);
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  const size_t row = size_t(inner) * elem_bytes;
  std::vector<uint8_t> out(size_t(outer) * size_t(local) * row);
  const auto* src = static_cast<const uint8_t*>(data);
  uint8_t* dst = out.data();
  for (int64_t o = 0; o < outer; ++o) {
    int64_t at = 0;
    for (size_t i = 0; i < parts.size(); ++i) {
      const int pieces = slice.pieces_of(i, tp.ranks);
      const int64_t piece = parts[i] / pieces;
      const int64_t from = at + int64_t(tp.rank) * pieces / tp.ranks * piece;
      std::memcpy(dst, src + (size_t(o) * size_t(len) + size_t(from)) * row, size_t(piece) * row);
      dst += size_t(piece) * row;
      at += parts[i];
    }
  }
  *out_shape = shape;
  (*out_shape)[axis] = local;
  return out;
}

const ParamSlice* ParamSink::slice_of(const std::string& param) const {
  if (tp_.ranks <= 1 || slices_.empty()) return nullptr;
  auto it = slices_.find(param);
  for (const char* tail : {".quants", ".scales"}) {
    const size_t n = std::strlen(tail);
    if (it == slices_.end() && param.size() > n && param.compare(param.size() - n, n, tail) == 0)
      it = slices_.find(param.substr(0, param.size() - n));
  }
  return it == slices_.end() ? nullptr : &it->second;
}

void ParamSink::set(const std::string& param, const HostTensor& t) const {
  const ParamSlice* s = slice_of(param);
  if (!s) {
    exe_.set_param(param, t);
    return;
  }
  HostTensor part{t.dtype, {}, {}};
  part.bytes = slice_for_rank(param, t.bytes.data(), dtype_size(t.dtype), t.shape, *s, tp_, &part.shape);
  exe_.set_param(param, part);
}

void ParamSink::set_f32(const std::string& param, const float* data, size_t count, const Shape& shape) const {
  const ParamSlice* s = slice_of(param);
  if (!s) {
    exe_.set_param_f32(param, data, count);
    return;
  }
  RLX_CHECK(int64_t(count) == numel(shape), "tensor '" << param << "': " << count << " values for " << shape_str(shape));
  Shape local;
  const std::vector<uint8_t> b = slice_for_rank(param, data, 4, shape, *s, tp_, &local);
  exe_.set_param_f32(param, reinterpret_cast<const float*>(b.data()), b.size() / 4);
}

void ParamSink::set_bytes(const std::string& param, DType dt, const void* data, size_t bytes, const Shape& shape) const {
  const ParamSlice* s = slice_of(param);
  if (!s) {
    exe_.set_param_bytes(param, dt, data, bytes);
    return;
  }
  RLX_CHECK(bytes == size_t(numel(shape)) * dtype_size(dt),
            "tensor '" << param << "': " << bytes << " bytes for " << shape_str(shape) << " of " << dtype_name(dt));
  Shape local;
  const std::vector<uint8_t> b = slice_for_rank(param, data, dtype_size(dt), shape, *s, tp_, &local);
  exe_.set_param_bytes(param, dt, b.data(), b.size());
}

}  // namespace rlx
