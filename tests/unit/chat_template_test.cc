// Chat templates: real models' templates (tests/data/chat_templates/*.jinja)
// rendered over several conversations must equal, byte for byte, what jinja2
// produced for them in expected.json (render_expected.py), including the
// exceptions the templates raise; plus family detection and turn ends.
#include "models/chat_template.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "rlx/error.h"

namespace rlx {
namespace {

const std::string kDir = std::string(RLX_SOURCE_DIR) + "/tests/data/chat_templates/";

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  EXPECT_TRUE(f.good()) << path;
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

const nlohmann::json& expected() {
  static const nlohmann::json j = nlohmann::json::parse(read_file(kDir + "expected.json"));
  return j;
}

std::vector<ChatMessage> conversation(const std::string& name) {
  std::vector<ChatMessage> out;
  for (const auto& m : expected()["conversations"][name])
    out.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
  return out;
}

// The family each test template belongs to.
const std::map<std::string, ChatFormat> kFamilies = {
    {"chatml_smollm2", ChatFormat::ChatML}, {"chatml_qwen2.5", ChatFormat::ChatML},
    {"zephyr_tinyllama", ChatFormat::Zephyr}, {"llama3", ChatFormat::Llama3},
    {"llama3.1", ChatFormat::Llama3},       {"llama3.2", ChatFormat::Llama3},
    {"llama2", ChatFormat::Llama2},         {"mistral_v0.1", ChatFormat::Mistral},
    {"mistral_v0.2", ChatFormat::Mistral},  {"mistral_v0.3", ChatFormat::Mistral},
    {"mistral_nemo", ChatFormat::Mistral},  {"gemma_7b", ChatFormat::Gemma},
    {"gemma2", ChatFormat::Gemma},          {"gemma3", ChatFormat::Gemma},
    {"phi3_mini", ChatFormat::Phi3},        {"phi3.5_mini", ChatFormat::Phi3},
};

TEST(ChatTemplate, EveryTemplateIsTested) {
  EXPECT_EQ(expected()["templates"].size(), kFamilies.size());
  for (const auto& [name, family] : kFamilies) EXPECT_TRUE(expected()["templates"].contains(name)) << name;
}

TEST(ChatTemplate, DetectsEachFamily) {
  for (const auto& [name, family] : kFamilies)
    EXPECT_EQ(detect_chat_format(read_file(kDir + name + ".jinja")), family) << name;
}

TEST(ChatTemplate, MatchesJinja) {
  const std::string today = expected()["today"].get<std::string>();
  int checked = 0;
  for (const auto& [name, t] : expected()["templates"].items()) {
    const std::string tmpl = read_file(kDir + name + ".jinja");
    const std::string bos = t["bos_token"], eos = t["eos_token"];
    for (const auto& c : t["cases"]) {
      const std::string conv = c["conversation"];
      const bool gen = c["add_generation_prompt"];
      const std::string where = name + " / " + conv + (gen ? " / generation prompt" : "");
      const auto messages = conversation(conv);
      if (c.contains("error")) {
        // The template raises: so must the renderer, with the template's words.
        try {
          render_chat(tmpl, messages, gen, bos, eos, today);
          ADD_FAILURE() << where << ": expected an error: " << c["error"];
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find(c["error"].get<std::string>()), std::string::npos)
              << where << ": " << e.what();
        }
      } else {
        try {
          EXPECT_EQ(render_chat(tmpl, messages, gen, bos, eos, today), c["output"].get<std::string>()) << where;
        } catch (const Error& e) {
          ADD_FAILURE() << where << ": " << e.what();
        }
      }
      ++checked;
    }
  }
  EXPECT_GT(checked, 200);
}

TEST(ChatTemplate, OneUserMessage) {
  const std::string smol = read_file(kDir + "chatml_smollm2.jinja");
  EXPECT_EQ(render_chat(smol, "Hi"),
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplate, UnknownTemplateIsNamed) {
  const std::string made_up = "{% for m in messages %}<<<{{ m.role }}>>> {{ m.content }}\n{% endfor %}";
  try {
    detect_chat_format(made_up);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("{% for m in messages %}<<<{{ m.role }}>>>"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(render_chat(made_up, {{"user", "x"}}, true), Error);
}

TEST(ChatTemplate, KnownFamilyWithUnrenderedFeaturesIsRefused) {
  // Mistral's [SYSTEM_PROMPT] templates (Mistral-Small/Large 24xx).
  const std::string v7 =
      "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}{{ '[INST] ' + "
      "message['content'] + '[/INST]' }}{% elif message['role'] == 'system' %}{{ '[SYSTEM_PROMPT] ' + "
      "message['content'] + '[/SYSTEM_PROMPT]' }}{% endif %}{% endfor %}";
  EXPECT_EQ(detect_chat_format(v7), ChatFormat::Mistral);
  EXPECT_THROW(render_chat(v7, {{"user", "x"}}, true), Error);
}

TEST(ChatTemplate, RolesAreChecked) {
  const std::string smol = read_file(kDir + "chatml_smollm2.jinja");
  EXPECT_THROW(render_chat(smol, {{"tool", "x"}}, true), Error);
  EXPECT_THROW(render_chat(smol, std::vector<ChatMessage>{}, true), Error);
}

TEST(ChatTemplate, TurnEnds) {
  EXPECT_EQ(chat_turn_end(ChatFormat::ChatML), "<|im_end|>");
  EXPECT_EQ(chat_turn_end(ChatFormat::Llama3), "<|eot_id|>");
  EXPECT_EQ(chat_turn_end(ChatFormat::Llama2), "</s>");
  EXPECT_EQ(chat_turn_end(ChatFormat::Mistral), "</s>");
  EXPECT_EQ(chat_turn_end(ChatFormat::Gemma), "<end_of_turn>");
  EXPECT_EQ(chat_turn_end(ChatFormat::Phi3), "<|end|>");
  EXPECT_EQ(chat_turn_end(ChatFormat::Zephyr), "</s>");
  // Each family's turn end is what its rendered assistant turns end with.
  for (const auto& [name, family] : kFamilies) {
    const auto& t = expected()["templates"][name];
    for (const auto& c : t["cases"])
      if (c["conversation"] == "ends_with_assistant" && !c["add_generation_prompt"] && c.contains("output")) {
        std::string end = chat_turn_end(family);
        if (end == "</s>") end = t["eos_token"];
        const std::string out = c["output"];
        const size_t reply = out.find("Pong");  // Llama 2 puts a space before eos
        ASSERT_NE(reply, std::string::npos) << name;
        EXPECT_LE(out.find(end, reply), reply + 5) << name;
      }
  }
  EXPECT_EQ(chat_format_name(ChatFormat::Llama3), "Llama 3");
}

TEST(ChatTemplate, StripIsPythons) {
  // trim/strip remove Unicode spaces (here U+3000 and U+00A0), not other bytes.
  const std::string gemma = read_file(kDir + "gemma2.jinja");
  EXPECT_EQ(render_chat(gemma, {{"user", "\xe3\x80\x80 hi\xc2\xa0\n"}}, false, "<bos>"),
            "<bos><start_of_turn>user\nhi<end_of_turn>\n");
  EXPECT_EQ(render_chat(gemma, {{"user", "\xc3\xa9"}}, false, "<bos>"),
            "<bos><start_of_turn>user\n\xc3\xa9<end_of_turn>\n");
}

}  // namespace
}  // namespace rlx
