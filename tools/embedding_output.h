// Where `rlx embed` writes its rows, one format each, row by row as the
// batches complete: json (one document), jsonl ({"index", "embedding"} per
// line), compact (one JSON array per line), table (a line per row and a
// labelled similarity matrix, for a terminal) and .npy (float32 [n, dim]).
#pragma once
#include <memory>
#include <ostream>
#include <string>
#include <vector>

struct EmbeddingHeader {
  std::string model;
  int dim = 0;
  bool normalized = false;
  bool similarity = false;  // the writer also gets the matrix at the end
};

class EmbeddingOutput {
 public:
  virtual ~EmbeddingOutput() = default;
  virtual void row(size_t index, const std::string& text, const std::vector<float>& v) = 0;
  // Closes the document; `sim` is empty unless the header asked for it.
  virtual void finish(const std::vector<std::vector<double>>& sim) = 0;
};

// format: json | jsonl | compact | table (for a terminal); `path` ending in
// .npy writes NumPy's format (no similarity there); "" writes to `out`.
std::unique_ptr<EmbeddingOutput> make_embedding_output(const std::string& format, const std::string& path,
                                                       const EmbeddingHeader& h, std::ostream& out);

std::string json_number(double x);  // short decimal form that round-trips closely enough
std::string json_vector(const std::vector<float>& v);
// "[index] first words of the text..." (at most 32 characters of it, control
// characters as spaces), and its width in characters.
std::string embedding_label(size_t index, const std::string& text);
size_t display_width(const std::string& s);
