// WordPiece (BERT) as a TextTokenizer: from a Hugging Face directory, or
// from a GGUF file (tokenizer.ggml.model "bert"). llama.cpp's converter writes word-initial
// pieces with a leading U+2581 and continuation pieces bare ("##" dropped);
// the bracketed control tokens stay as they are. Those are mapped back to
// the Hugging Face vocabulary and tokenized by WordPiece, so the result is
// BertTokenizerFast's.
#pragma once
#include <string>
#include <vector>

#include "tokenizers/text_tokenizer.h"
#include "tokenizers/wordpiece.h"

namespace rlx {

class GgufFile;

class WordPieceText : public TextTokenizer {
 public:
  static WordPieceText from_gguf(const GgufFile& f);
  // The same vocabulary as a Hugging Face WordPiece (control tokens matched
  // in the text, as BertTokenizerFast matches its special tokens): what an
  // embedder reads from a BERT GGUF. Its encode() always gives [CLS] ... [SEP].
  static WordPiece wordpiece_from_gguf(const GgufFile& f);
  // tokenizer.json, or vocab.txt + tokenizer_config.json (WordPiece::from_dir).
  static WordPieceText from_dir(const std::string& dir);

  using TextTokenizer::encode;
  // [CLS] ... [SEP] with add_special (a GGUF's add_bos_token / add_sep_token can turn either off); control tokens written in the text
  // ("[MASK]") are matched only with parse_special.
  std::vector<int32_t> encode(std::string_view text, const EncodeOptions& o) const override;
  EncodeOptions default_encode_options() const override { return {true, false}; }
  std::string decode(const std::vector<int32_t>& ids) const override;
  // The piece as it continues a text: a word-initial piece with its space.
  std::string token_bytes(int32_t id) const override;
  int32_t id_of(const std::string& token) const override;  // the GGUF spelling
  size_t vocab_size() const override { return tokens_.size(); }
  int32_t bos_id() const override { return cls_id_; }
  int32_t eos_id() const override { return sep_id_; }

 private:
  WordPieceText(std::vector<std::string> tokens, WordPiece with_specials, WordPiece plain, int32_t cls, int32_t sep)
      : tokens_(std::move(tokens)), with_specials_(std::move(with_specials)), plain_(std::move(plain)),
        cls_id_(cls), sep_id_(sep) {}

  std::vector<std::string> tokens_;  // as the file spells them
  WordPiece with_specials_, plain_;  // control tokens matched in the text, or not
  int32_t cls_id_, sep_id_;
  bool gguf_spelling_ = false;
  bool add_cls_ = true, add_sep_ = true;  // U+2581 starts a word; else "##" continues one
};

}  // namespace rlx
