// Where a loader puts a model's tensors: an executable's params, as they
// are, or each cut to a tensor-parallel rank's share where the model says
// (ParamSlice). Loaders hand over whole tensors; only the rank's part is
// written into its arena.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "rlx/session.h"

namespace rlx {

// Rank `rank` of `ranks` (tensor parallelism; 1 rank: the whole model).
struct TpRank {
  int rank = 0, ranks = 1;
};

// How a rank's param is cut from the whole tensor: along `dim` (0: the
// rows, a product's outputs; -1: the last dim, its inputs; 1: an expert
// stack's rows [E, n, k]); each of `parts`
// (lengths along that dim, summing to it; empty: one part, the whole dim)
// is split into pieces[i] equal pieces (pieces empty or 0: `ranks`) and
// rank r takes piece r * pieces / ranks of each, in order. A Q|K|V weight
// is three parts, so each rank gets its heads of each; with fewer KV heads
// than ranks, the K and V parts are split by KV head and ranks that share
// a KV head hold the same rows.
struct ParamSlice {
  int dim = 0;
  std::vector<int64_t> parts;
  std::vector<int> pieces;
  size_t axis(size_t rank) const { return dim < 0 ? rank - 1 : size_t(dim); }
  int pieces_of(size_t part, int ranks) const {
    return part < pieces.size() && pieces[part] > 0 ? pieces[part] : ranks;
  }
};

// The rank's share of a tensor `shape` of elements of `elem_bytes` bytes
// (rlx::Error naming `name` when a part does not split evenly).
std::vector<uint8_t> slice_for_rank(const std::string& name, const void* data, size_t elem_bytes, const Shape& shape,
                                    const ParamSlice& slice, TpRank tp, Shape* out_shape);

class ParamSink {
 public:
  // Implicit: a loader given an executable writes into it whole.
  ParamSink(Executable& exe) : exe_(exe) {}  // NOLINT(google-explicit-constructor)
  // slices: by tensor name (W for W, W.quants and W.scales); others are whole.
  ParamSink(Executable& exe, TpRank tp, std::map<std::string, ParamSlice> slices)
      : exe_(exe), tp_(tp), slices_(std::move(slices)) {}

  // t holds the whole tensor.
  void set(const std::string& param, const HostTensor& t) const;
  void set_f32(const std::string& param, const float* data, size_t count, const Shape& shape) const;
  // `bytes` of dt values (f32, f16 or bf16) of the whole tensor `shape`.
  void set_bytes(const std::string& param, DType dt, const void* data, size_t bytes, const Shape& shape) const;

 private:
  const ParamSlice* slice_of(const std::string& param) const;

  Executable& exe_;
  TpRank tp_;
  std::map<std::string, ParamSlice> slices_;
};

}  // namespace rlx
