#include "tools/npy_writer.h"

#include "rlx/error.h"

namespace {
// Room for any row count, so the rewritten header has the same length.
constexpr size_t kHeaderBytes = 128;
}  // namespace

NpyWriter::NpyWriter(const std::string& path, int64_t dim) : path_(path), out_(path, std::ios::binary), dim_(dim) {
  RLX_CHECK(out_, "cannot write --output '" << path << "'");
  write_header();
}

NpyWriter::~NpyWriter() {
  try {
    close();
  } catch (...) {  // a destructor must not throw; close() is called explicitly on the normal path
  }
}

void NpyWriter::write_header() {
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + std::to_string(rows_) + ", " +
                     std::to_string(dim_) + "), }";
  // Format 1.0: magic, version, a little-endian u16 header length; the
  // header is padded with spaces and ends in a newline.
  std::string head = "\x93NUMPY";
  head += char(1);
  head += char(0);
  const size_t len = kHeaderBytes - 10;
  head += char(len & 0xff);
  head += char(len >> 8);
  dict.resize(len - 1, ' ');
  head += dict + "\n";
  out_.seekp(0);
  out_.write(head.data(), std::streamsize(head.size()));
  out_.seekp(0, std::ios::end);
}

void NpyWriter::write_row(const std::vector<float>& row) {
  RLX_CHECK(int64_t(row.size()) == dim_, "npy: row of " << row.size() << " values, expected " << dim_);
  out_.write(reinterpret_cast<const char*>(row.data()), std::streamsize(row.size() * sizeof(float)));
  ++rows_;
}

void NpyWriter::close() {
  if (closed_) return;
  closed_ = true;
  write_header();
  out_.close();
  RLX_CHECK(out_, "writing --output '" << path_ << "' failed");
}
