// LLM::chat_options on the default chat model (SmolLM2, ChatML): the turn end
// becomes a stop id, and chat() generates exactly what the engine does with
// chat_tokens() and those options.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "rlx/llm.h"

namespace rlx {
namespace {

const std::string kSmolLM2 =
    std::string(RLX_SOURCE_DIR) + "/models/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf";

TEST(LlmChat, ChatOptionsAddTheTurnEndAndChatUsesThem) {
  ASSERT_TRUE(std::filesystem::exists(kSmolLM2)) << kSmolLM2 << " is missing: run scripts/setup";
  LlmOptions lo;
  lo.threads = 1;
  lo.ctx_size = 256;
  lo.max_sequences = 1;
  LLM llm(kSmolLM2, lo);
  const int32_t im_end = llm.tokenizer().token_id("<|im_end|>");
  ASSERT_GE(im_end, 0);
  GenerateOptions o;
  o.max_tokens = 12;
  o.stop = {"never seen"};
  o.stop_ids = {7};
  const GenerateOptions c = llm.chat_options(o);
  EXPECT_EQ(c.stop, o.stop);
  EXPECT_EQ(c.stop_ids, (std::vector<int32_t>{7, im_end}));
  EXPECT_EQ(c.max_tokens, 12);

  const std::vector<ChatMessage> messages = {{"user", "What is the capital of France?"}};
  auto seq = llm.new_sequence();
  const Generation chat = llm.chat(*seq, messages, o);
  seq.reset();
  const Generation direct = llm.generate(llm.chat_tokens(messages), c);
  EXPECT_FALSE(chat.ids.empty());
  EXPECT_EQ(chat.ids, direct.ids);
  EXPECT_EQ(chat.text, direct.text);
  EXPECT_EQ(chat.finish, direct.finish);
  // The reply never runs past its turn end.
  const auto ends = std::count(chat.ids.begin(), chat.ids.end(), im_end);
  EXPECT_LE(ends, 1);
  if (ends == 1) EXPECT_EQ(chat.ids.back(), im_end);
}

}  // namespace
}  // namespace rlx
