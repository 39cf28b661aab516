// Rows of float32 written as they come into a NumPy .npy file ([rows, dim],
// C order); the header is rewritten with the final row count on close, so
// a run that stops early still leaves a file numpy reads.
#pragma once
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

class NpyWriter {
 public:
  NpyWriter(const std::string& path, int64_t dim);
  ~NpyWriter();  // close()s
  void write_row(const std::vector<float>& row);
  void close();
  int64_t rows() const { return rows_; }

 private:
  void write_header();
  std::string path_;
  std::ofstream out_;
  int64_t dim_ = 0, rows_ = 0;
  bool closed_ = false;
};
