#include "models/post_template.h"

#include <map>
#include <optional>

#include "rlx/error.h"
#include "tokenizers/pair_truncation.h"

namespace rlx {
namespace {

int32_t token_id(const JsonField& pair, size_t vocab) {
  // ["</s>", 2]
  return int32_t(pair.at(1).integer(0, int64_t(vocab) - 1));
}

std::vector<PostTemplate::Item> read_items(const JsonField& list,
                                           const std::map<std::string, std::vector<int32_t>>& specials) {
  std::vector<PostTemplate::Item> items;
  for (size_t i = 0; i < list.size(); ++i) {
    JsonField it = list.at(i).object();
    PostTemplate::Item item;
    if (it.has("SpecialToken")) {
      JsonField s = it.at("SpecialToken").object();
      const std::string name = s.at("id").string();
      auto found = specials.find(name);
      RLX_CHECK(found != specials.end(), s.where() << "special token '" << name << "' is not in special_tokens");
      item.ids = found->second;
      item.type_id = int32_t(s.integer_or("type_id", 0, 0, 1 << 16));
    } else {
      JsonField s = it.at("Sequence").object();
      const std::string name = s.at("id").string();
      RLX_CHECK(name == "A" || name == "B", s.where() << "sequence '" << name << "' is neither A nor B");
      item.sequence = name == "A" ? 0 : 1;
      item.type_id = int32_t(s.integer_or("type_id", 0, 0, 1 << 16));
    }
    items.push_back(std::move(item));
  }
  return items;
}

}  // namespace

PostTemplate PostTemplate::none() {
  PostTemplate t;
  t.single_ = {{{}, 0, 0}};
  t.pair_ = {{{}, 0, 0}, {{}, 1, 1}};
  return t;
}

PostTemplate PostTemplate::from_json(const JsonField& post, size_t vocab) {
  post.object();
  const std::string type = post.at("type").string();
  if (type == "ByteLevel") return none();
  if (type == "Sequence") {
    const JsonField steps = post.at("processors");
    std::optional<PostTemplate> found;
    for (size_t i = 0; i < steps.size(); ++i) {
      const JsonField step = steps.at(i).object();
      if (step.at("type").string() == "ByteLevel") continue;
      RLX_CHECK(!found, step.where() << "a second post_processor step that adds tokens is not supported");
      found = from_json(step, vocab);
    }
    return found ? *found : none();
  }
  PostTemplate t;
  if (type == "RobertaProcessing" || type == "BertProcessing") {
    const std::vector<int32_t> cls{token_id(post.at("cls"), vocab)}, sep{token_id(post.at("sep"), vocab)};
    const int32_t second = type == "BertProcessing" ? 1 : 0;
    t.single_ = {{cls, -1, 0}, {{}, 0, 0}, {sep, -1, 0}};
    t.pair_ = {{cls, -1, 0}, {{}, 0, 0}, {sep, -1, 0}};
    if (type == "RobertaProcessing") t.pair_.push_back({sep, -1, 0});
    t.pair_.push_back({{}, 1, second});
    t.pair_.push_back({sep, -1, second});
    return t;
  }
  RLX_CHECK(type == "TemplateProcessing", post.where() << "post_processor '" << type
                                                       << "' is not supported (TemplateProcessing, "
                                                          "RobertaProcessing, BertProcessing, ByteLevel and a "
                                                          "Sequence of them are)");
  std::map<std::string, std::vector<int32_t>> specials;
  post.at("special_tokens").object().for_each_member([&](const std::string& name, const JsonField& s) {
    JsonField ids = s.at("ids");
    std::vector<int32_t>& v = specials[name];
    for (size_t i = 0; i < ids.size(); ++i) v.push_back(int32_t(ids.at(i).integer(0, int64_t(vocab) - 1)));
  });
  t.single_ = read_items(post.at("single"), specials);
  t.pair_ = read_items(post.at("pair"), specials);
  auto count = [](const std::vector<Item>& items, int seq) {
    size_t n = 0;
    for (const Item& i : items) n += i.sequence == seq;
    return n;
  };
  RLX_CHECK(count(t.single_, 0) == 1 && count(t.single_, 1) == 0,
            post.where() << "single must hold sequence A once and not B");
  RLX_CHECK(count(t.pair_, 0) == 1 && count(t.pair_, 1) == 1, post.where() << "pair must hold A and B once each");
  return t;
}

size_t PostTemplate::added(bool pair) const {
  size_t n = 0;
  for (const Item& i : pair ? pair_ : single_) n += i.ids.size();
  return n;
}

std::vector<int32_t> PostTemplate::special_ids() const {
  std::vector<int32_t> ids;
  for (const auto* items : {&single_, &pair_})
    for (const Item& i : *items) ids.insert(ids.end(), i.ids.begin(), i.ids.end());
  return ids;
}

TokenizedText PostTemplate::apply(std::vector<int32_t> a, std::vector<int32_t> b, bool pair, int max_len) const {
  const size_t extra = added(pair);
  RLX_CHECK(max_len >= 0 && size_t(max_len) >= extra,
            "tokenizer: a length of " << max_len << " leaves no room for the " << extra << " special tokens");
  const size_t room = size_t(max_len) - extra;
  TokenizedText out;
  if (pair) {
    out.truncated = cut_longest_first(a, b, room);
  } else {
    out.truncated = a.size() > room;
    if (out.truncated) a.resize(room);
  }
  for (const Item& i : pair ? pair_ : single_) {
    const std::vector<int32_t>& part = i.sequence < 0 ? i.ids : i.sequence == 0 ? a : b;
    out.ids.insert(out.ids.end(), part.begin(), part.end());
    out.type_ids.insert(out.type_ids.end(), part.size(), i.type_id);
  }
  return out;
}

}  // namespace rlx
