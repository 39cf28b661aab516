// The strict JSON field reader every loader goes through: types, ranges and
// integer-ness are checked before any conversion; errors name file and path.
#include "models/json_read.h"

#include <gtest/gtest.h>

#include "models/test_files.h"  // tests/models
#include "test_util.h"

namespace rlx {
namespace {

using test::error_of;

JsonField field(const nlohmann::json& j) { return JsonField(j, "f.json"); }

TEST(JsonRead, IntegersMustBeIntegersAndFit) {
  const auto doc = nlohmann::json::parse(
      R"({"ok": 384, "float_ok": 384.0, "wraps": 4294967680, "fraction": 384.9, "huge": 1e300,
          "negative": -5, "text": "384", "big_unsigned": 18446744073709551615, "inf_like": -1e300})");
  JsonField j = field(doc);
  EXPECT_EQ(j.at("ok").integer(1, 65536), 384);
  EXPECT_EQ(j.at("float_ok").integer(1, 65536), 384);
  struct Bad {
    const char* key;
    const char* says;
  };
  for (Bad b : {Bad{"wraps", "4294967680 is outside [1, 65536]"}, Bad{"fraction", "384.9 is not an integer"},
                Bad{"huge", "is outside [1, 65536]"}, Bad{"negative", "-5 is outside [1, 65536]"},
                Bad{"text", "must be an integer, not string"},
                Bad{"big_unsigned", "18446744073709551615 is outside"}, Bad{"inf_like", "is outside"}}) {
    std::string msg = error_of([&] { j.at(b.key).integer(1, 65536); });
    EXPECT_NE(msg.find(b.says), std::string::npos) << b.key << ": " << msg;
    EXPECT_NE(msg.find("'f.json': " + std::string(b.key) + ":"), std::string::npos) << msg;
  }
  // The full int64 range: the largest double below 2^63 fits, 2^63 does not.
  const auto edge = nlohmann::json::parse(R"({"a": 9.2233720368547748e18, "b": 9.2233720368547758e18})");
  EXPECT_EQ(field(edge).at("a").integer(), 9223372036854774784);
  EXPECT_NE(error_of([&] { field(edge).at("b").integer(); }).find("outside"), std::string::npos);
}

TEST(JsonRead, NumbersBooleansStringsAndDefaults) {
  const auto doc = nlohmann::json::parse(
      R"({"eps": 1e-12, "huge": 1e300, "flag": "yes", "name": 5, "none": null, "t": true})");
  JsonField j = field(doc);
  EXPECT_DOUBLE_EQ(j.at("eps").number(0, 1), 1e-12);
  EXPECT_NE(error_of([&] { j.at("huge").number(0, 1); }).find("is outside [0, 1]"), std::string::npos);
  EXPECT_NE(error_of([&] { j.at("flag").boolean(); }).find("flag: must be true or false, not string"),
            std::string::npos);
  EXPECT_NE(error_of([&] { j.at("name").string(); }).find("must be a string, not number"), std::string::npos);
  EXPECT_EQ(j.integer_or("none", 7, 0, 10), 7);    // null reads as absent
  EXPECT_EQ(j.integer_or("absent", 8, 0, 10), 8);
  EXPECT_TRUE(j.boolean_or("t", false));
  EXPECT_NE(error_of([&] { j.at("none"); }).find("none: is required"), std::string::npos);
}

TEST(JsonRead, PathsNameNestedFields) {
  const auto doc = nlohmann::json::parse(R"({"modules": [{"type": "a"}, 5, {"type": 7}]})");
  JsonField j = field(doc);
  EXPECT_NE(error_of([&] { j.at("modules").at(1).object(); }).find("modules[1]: must be a JSON object, not number"),
            std::string::npos);
  EXPECT_NE(error_of([&] { j.at("modules").at(2).at("type").string(); }).find("modules[2].type: must be a string"),
            std::string::npos);
  EXPECT_NE(error_of([&] { j.at("modules").at(3); }).find("has no element 3"), std::string::npos);
  EXPECT_NE(error_of([&] { j.at("modules").at("x"); }).find("modules: must be a JSON object, not array"),
            std::string::npos);
  const auto arr = nlohmann::json::parse("[1, 2]");
  EXPECT_NE(error_of([&] { field(arr).object(); }).find("top level: must be a JSON object, not array"),
            std::string::npos);
}

TEST(JsonRead, FilesMustBeRegularAndValid) {
  test::TempDir d;
  std::filesystem::create_directories(d.path() / "config.json");
  std::string msg = error_of([&] { read_json_file(d.path() / "config.json"); });
  EXPECT_NE(msg.find("config.json' is not a regular file"), std::string::npos) << msg;
  msg = error_of([&] { read_json_file(d.path() / "absent.json"); });
  EXPECT_NE(msg.find("absent.json': no such file"), std::string::npos) << msg;
  test::write_text(d.path() / "big.json", std::string(2000, ' ') + "{}");
  msg = error_of([&] { read_json_file(d.path() / "big.json", 1000); });
  EXPECT_NE(msg.find("more than the 1000"), std::string::npos) << msg;
  EXPECT_TRUE(read_json_file(d.path() / "big.json").is_object());
  test::write_text(d.path() / "bad.json", "{\"a\": ");
  msg = error_of([&] { read_json_file(d.path() / "bad.json"); });
  EXPECT_NE(msg.find("bad.json' is not valid JSON"), std::string::npos) << msg;
}

}  // namespace
}  // namespace rlx
