#include "tools/embedding_output.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "rlx/error.h"
#include "tools/npy_writer.h"

std::string json_number(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.7g", x);
  return buf;
}

std::string json_vector(const std::vector<float>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + json_number(v[i]);
  return s + "]";
}

size_t display_width(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;  // one per UTF-8 sequence
  return n;
}

std::string embedding_label(size_t index, const std::string& text) {
  constexpr size_t kMax = 32;  // characters of the text shown
  std::string words;
  size_t shown = 0, i = 0;
  bool space = false, cut = false;
  while (i < text.size()) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    const size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    if (c < 0x20 || c == 0x7F || c == ' ') {  // whitespace and control characters: one space
      space = !words.empty();
      ++i;
      continue;
    }
    if (shown + (space ? 1 : 0) + 1 > kMax) {
      cut = true;
      break;
    }
    if (space) words += ' ', ++shown, space = false;
    words.append(text, i, std::min(len, text.size() - i));
    ++shown;
    i += len;
  }
  return "[" + std::to_string(index) + "] " + (words.empty() ? "(empty)" : words) + (cut ? "..." : "");
}

namespace {

std::string json_string(const std::string& s) {
  return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

class TextOutput : public EmbeddingOutput {
 public:
  TextOutput(const std::string& path, std::ostream& out) {
    if (!path.empty()) {
      file_.open(path, std::ios::binary);
      RLX_CHECK(file_, "cannot write --output '" << path << "'");
    }
    os_ = path.empty() ? &out : &file_;
  }

 protected:
  std::ostream& os() { return *os_; }

 private:
  std::ofstream file_;
  std::ostream* os_;
};

class JsonOutput : public TextOutput {
 public:
  JsonOutput(const std::string& path, const EmbeddingHeader& h, std::ostream& out) : TextOutput(path, out), h_(h) {
    os() << "{\n  \"model\": " << json_string(h.model) << ",\n  \"dim\": " << h.dim
         << ",\n  \"normalized\": " << (h.normalized ? "true" : "false") << ",\n  \"embeddings\": [";
  }
  void row(size_t index, const std::string& text, const std::vector<float>& v) override {
    os() << (rows_++ ? ",\n" : "\n") << "    {\"index\": " << index << ", \"text\": " << json_string(text)
         << ", \"embedding\": " << json_vector(v) << "}";
    os().flush();
  }
  void finish(const std::vector<std::vector<double>>& sim) override {
    os() << (rows_ ? "\n  ]" : "]");
    if (h_.similarity) {
      os() << ",\n  \"similarity\": [\n";
      for (size_t i = 0; i < sim.size(); ++i) {
        os() << "    [";
        for (size_t j = 0; j < sim.size(); ++j) os() << (j ? ", " : "") << json_number(sim[i][j]);
        os() << "]" << (i + 1 < sim.size() ? "," : "") << "\n";
      }
      os() << "  ]";
    }
    os() << "\n}\n";
    os().flush();
  }

 private:
  EmbeddingHeader h_;
  size_t rows_ = 0;
};

class JsonlOutput : public TextOutput {
 public:
  using TextOutput::TextOutput;
  void row(size_t index, const std::string&, const std::vector<float>& v) override {
    os() << "{\"index\": " << index << ", \"embedding\": " << json_vector(v) << "}\n";
    os().flush();
  }
  void finish(const std::vector<std::vector<double>>&) override { os().flush(); }
};

// One JSON array per line; with the similarity matrix asked for, only the
// matrix, one row per line.
class CompactOutput : public TextOutput {
 public:
  CompactOutput(const std::string& path, const EmbeddingHeader& h, std::ostream& out)
      : TextOutput(path, out), similarity_(h.similarity) {}
  void row(size_t, const std::string&, const std::vector<float>& v) override {
    if (similarity_) return;
    os() << json_vector(v) << "\n";
    os().flush();
  }
  void finish(const std::vector<std::vector<double>>& sim) override {
    for (const auto& r : sim) {
      for (size_t j = 0; j < r.size(); ++j) {
        char buf[16];
        std::snprintf(buf, sizeof buf, "%s%.4f", j ? " " : "", r[j]);
        os() << buf;
      }
      os() << "\n";
    }
    os().flush();
  }

 private:
  bool similarity_;
};

// For a person at a terminal: one line per row (its index, the first words
// of its text, the first values), then the similarity matrix with the rows
// labelled the same way.
class TableOutput : public TextOutput {
 public:
  TableOutput(const std::string& path, const EmbeddingHeader& h, std::ostream& out) : TextOutput(path, out), h_(h) {
    os() << h.model << ": " << h.dim << " values a row" << (h.normalized ? ", unit length" : "") << "\n";
  }
  void row(size_t index, const std::string& text, const std::vector<float>& v) override {
    labels_.push_back(embedding_label(index, text));
    std::string line = labels_.back() + "  [";
    char buf[32];
    for (size_t i = 0; i < v.size() && i < 4; ++i) {
      std::snprintf(buf, sizeof buf, "%s%.4f", i ? ", " : "", double(v[i]));
      line += buf;
    }
    os() << line << (v.size() > 4 ? ", ...]" : "]") << "\n";
    os().flush();
  }
  void finish(const std::vector<std::vector<double>>& sim) override {
    if (!h_.similarity) return;
    size_t width = 0;
    for (const std::string& l : labels_) width = std::max(width, display_width(l));
    os() << "\ncosine similarity\n" << std::string(width, ' ');
    char buf[32];
    for (size_t j = 0; j < sim.size(); ++j) {
      std::snprintf(buf, sizeof buf, " %7s", ("[" + std::to_string(j) + "]").c_str());
      os() << buf;
    }
    os() << "\n";
    for (size_t i = 0; i < sim.size(); ++i) {
      os() << labels_[i] << std::string(width - display_width(labels_[i]), ' ');
      for (double x : sim[i]) {
        std::snprintf(buf, sizeof buf, " %7.4f", x);
        os() << buf;
      }
      os() << "\n";
    }
    os().flush();
  }

 private:
  EmbeddingHeader h_;
  std::vector<std::string> labels_;
};

class NpyOutput : public EmbeddingOutput {
 public:
  NpyOutput(const std::string& path, int dim) : npy_(path, dim) {}
  void row(size_t, const std::string&, const std::vector<float>& v) override { npy_.write_row(v); }
  void finish(const std::vector<std::vector<double>>&) override { npy_.close(); }

 private:
  NpyWriter npy_;
};

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

std::unique_ptr<EmbeddingOutput> make_embedding_output(const std::string& format, const std::string& path,
                                                       const EmbeddingHeader& h, std::ostream& out) {
  if (ends_with(path, ".npy")) {
    RLX_CHECK(!h.similarity, "--similarity cannot be written into an .npy file; drop it or use another --output");
    return std::make_unique<NpyOutput>(path, h.dim);
  }
  if (format == "json") return std::make_unique<JsonOutput>(path, h, out);
  if (format == "jsonl") return std::make_unique<JsonlOutput>(path, out);
  if (format == "compact") return std::make_unique<CompactOutput>(path, h, out);
  if (format == "table") return std::make_unique<TableOutput>(path, h, out);
  RLX_FAIL("--format must be json, jsonl, compact or table, not '" << format << "'");
}
