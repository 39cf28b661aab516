#include "models/unigram_embedding_tokenizer.h"

#include "models/json_read.h"
#include "models/post_template.h"
#include "models/template_embedding_tokenizer.h"
#include "rlx/error.h"
#include "tokenizers/unigram.h"

namespace rlx {

std::unique_ptr<EmbeddingTokenizer> load_unigram_embedding_tokenizer(const nlohmann::json& doc,
                                                                     const std::string& path) {
  UnigramTokenizer u = UnigramTokenizer::from_tokenizer_json(doc, path);
  JsonField j(doc, path);
  RLX_CHECK(j.has("post_processor"),
            j.where() << "post_processor is missing: the model's special tokens (<s> ... </s>) are unknown");
  PostTemplate t = PostTemplate::from_json(j.at("post_processor"), u.vocab_size());
  const int32_t pad = u.id_of("<pad>");
  return std::make_unique<TemplateEmbeddingTokenizer<UnigramTokenizer>>("unigram", std::move(u), std::move(t),
                                                                        pad >= 0 ? pad : 0);
}

}  // namespace rlx
