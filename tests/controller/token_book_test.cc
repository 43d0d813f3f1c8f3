// TokenBook: the --tokens file's checks, who holds which token, and a file
// changed under a running book (tokens added and revoked without a restart).
#include "hmpmd/controller/token_book.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

namespace hmpmd {
namespace {

using ::testing::HasSubstr;

constexpr char kVision[] = "vision-0123456789abcdef";
constexpr char kDash[] = "dash-0123456789abcdef";

std::string Entry(const std::string& name, const std::string& role, const std::string& token) {
  return R"({"name": ")" + name + R"(", "role": ")" + role + R"(", "token": ")" + token + "\"}";
}

std::string File(const std::vector<std::string>& entries) {
  std::string s = R"({"tokens": [)";
  for (size_t i = 0; i < entries.size(); ++i) s += (i ? ", " : "") + entries[i];
  return s + "]}";
}

std::string ParseError(const std::string& text) {
  auto got = ParseTokens(text, "t.json");
  return got.ok() ? "(parsed)" : got.status().message();
}

TEST(ParseTokensTest, ReadsNamesRolesAndTokens) {
  auto got = ParseTokens(File({Entry("vision", "submit", kVision), Entry("dash", "read", kDash),
                               Entry("ops.team_1", "admin", "ops-0123456789abcdef")}),
                         "t.json");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), 3u);
  EXPECT_EQ((*got)[0].holder.name, "vision");
  EXPECT_EQ((*got)[0].holder.role, TokenRole::kSubmit);
  EXPECT_EQ((*got)[1].holder.role, TokenRole::kRead);
  EXPECT_EQ((*got)[2].holder.role, TokenRole::kAdmin);
  EXPECT_EQ((*got)[0].token, kVision);
  EXPECT_TRUE(ParseTokens(R"({"tokens": []})", "t.json").ok());
}

// A token's tenant is its name unless given; several tokens may share a
// tenant, whose share (default 1), given on any of them, holds for all.
TEST(ParseTokensTest, ReadsTenantsAndTheirShares) {
  auto got = ParseTokens(
      R"({"tokens": [
        {"name": "vision", "role": "submit", "token": "vision-0123456789abcdef", "share": 3},
        {"name": "vision-dash", "role": "read", "token": "vdash-0123456789abcdef",
         "tenant": "vision"},
        {"name": "audio", "role": "submit", "token": "audio-0123456789abcdef"}]})",
      "t.json");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), 3u);
  EXPECT_EQ((*got)[0].holder.tenant, "vision");
  EXPECT_EQ((*got)[0].holder.share, 3u);
  EXPECT_EQ((*got)[1].holder.tenant, "vision");
  EXPECT_EQ((*got)[1].holder.share, 3u);
  EXPECT_EQ((*got)[2].holder.tenant, "audio");
  EXPECT_EQ((*got)[2].holder.share, 1u);
}

TEST(ParseTokensTest, EachTenantOrShareMistakeIsNamed) {
  auto with = [](const std::string& extra) {
    return ParseError(R"({"tokens": [{"name": "a", "role": "submit", "token": ")" +
                      std::string(kVision) + "\", " + extra + "}]}");
  };
  EXPECT_THAT(with(R"("share": 0)"), HasSubstr("tokens[0].share: a whole number from 1 to"));
  EXPECT_THAT(with(R"("share": -2)"), HasSubstr("tokens[0].share: a whole number"));
  EXPECT_THAT(with(R"("share": 1.5)"), HasSubstr("tokens[0].share: a whole number"));
  EXPECT_THAT(with(R"("share": "2")"), HasSubstr("tokens[0].share: a whole number"));
  EXPECT_THAT(with(R"("share": 1000001)"), HasSubstr("from 1 to 1000000"));
  EXPECT_THAT(with(R"("tenant": "a b")"),
              HasSubstr("tokens[0].tenant: only letters, digits and . _ -"));
  EXPECT_THAT(with(R"("tenant": "")"), HasSubstr("tokens[0].tenant: 1 to 64 characters"));
  EXPECT_THAT(with(R"("tenant": 3)"), HasSubstr("tokens[0].tenant: expected a string"));
  EXPECT_THAT(with(R"("quota": 3)"),
              HasSubstr("unknown field 'quota' (it takes name, role, token, tenant, share)"));
  EXPECT_THAT(ParseError(R"({"tokens": [
        {"name": "a", "role": "submit", "token": "a-0123456789abcdef", "share": 2},
        {"name": "b", "role": "read", "token": "b-0123456789abcdef", "tenant": "a", "share": 5}]})"),
              HasSubstr("tokens[1].share: tenant 'a' has share 2 at tokens[0]"));
}

TEST(ParseTokensTest, EachMistakeIsNamedWithoutPrintingAToken) {
  EXPECT_THAT(ParseError("["), HasSubstr("tokens file t.json: "));
  EXPECT_THAT(ParseError(R"({"tokens": {}})"), HasSubstr("\"tokens\": expected an array"));
  EXPECT_THAT(ParseError(R"({"tokens": [], "x": 1})"), HasSubstr("unknown field 'x'"));
  EXPECT_THAT(ParseError(File({Entry("a", "root", kVision)})),
              HasSubstr("tokens[0].role: 'root' is not admin, submit or read"));
  EXPECT_THAT(ParseError(File({Entry("a b", "read", kVision)})),
              HasSubstr("tokens[0].name: only letters, digits and . _ -"));
  EXPECT_THAT(ParseError(File({Entry("", "read", kVision)})), HasSubstr("tokens[0].name: 1 to"));
  EXPECT_THAT(ParseError(File({Entry("a", "read", "short")})),
              HasSubstr("tokens[0].token: 16 to 256 characters (this one has 5)"));
  EXPECT_THAT(ParseError(File({Entry("a", "read", "with a blank 0123456789")})),
              HasSubstr("tokens[0].token: printable ASCII without blanks"));
  EXPECT_THAT(ParseError(File({Entry("a", "read", kVision), Entry("a", "read", kDash)})),
              HasSubstr("tokens[1].name: 'a' is given twice"));
  const std::string twice =
      ParseError(File({Entry("a", "read", kVision), Entry("b", "read", kVision)}));
  EXPECT_THAT(twice, HasSubstr("tokens[1].token: the same as 'a''s"));
  EXPECT_THAT(twice, ::testing::Not(HasSubstr(kVision)));
  EXPECT_THAT(ParseError(R"({"tokens": [{"name": "a", "role": "read"}]})"),
              HasSubstr("tokens[0]: missing 'token'"));
  EXPECT_THAT(ParseError(R"({"tokens": [{"name": "a", "role": "read", "token": 7}]})"),
              HasSubstr("tokens[0].token: expected a string"));
}

class TokenBookTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // One folder a test: ctest runs the tests of this file side by side.
    dir_ = ::testing::TempDir() + "hmpmd_token_book_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    path_ = dir_ + "/tokens.json";
  }
  // Writes the file whole (a new inode, as an editor's save) with `mode`.
  void Write(const std::string& text, mode_t mode = 0600) {
    const std::string tmp = path_ + ".tmp";
    std::ofstream(tmp) << text;
    ::chmod(tmp.c_str(), mode);
    std::filesystem::rename(tmp, path_);
  }
  // Waits out the book's recheck interval.
  static void Later() {
    std::this_thread::sleep_for(std::chrono::milliseconds(TokenBook::kRecheckMs + 50));
  }
  std::string dir_, path_;
};

TEST_F(TokenBookTest, WithoutTokensEveryDoorIsOpen) {
  TokenBook book;
  EXPECT_FALSE(book.enabled());
  EXPECT_FALSE(book.Find("anything").has_value());
}

TEST_F(TokenBookTest, TheClusterTokenIsHeldByAdmin) {
  TokenBook book("cluster-0123456789abcdef");
  EXPECT_TRUE(book.enabled());
  auto who = book.Find("cluster-0123456789abcdef");
  ASSERT_TRUE(who.has_value());
  EXPECT_EQ(who->name, "admin");
  EXPECT_EQ(who->role, TokenRole::kAdmin);
  EXPECT_FALSE(book.Find("cluster-0123456789abcde").has_value());
  EXPECT_FALSE(book.Find("").has_value());
}

TEST_F(TokenBookTest, TokensAreAddedAndRevokedWhenTheFileChanges) {
  Write(File({Entry("vision", "submit", kVision)}));
  TokenBook book("cluster-0123456789abcdef");
  ASSERT_TRUE(book.Watch(path_).ok());
  ASSERT_TRUE(book.Find(kVision).has_value());
  EXPECT_EQ(book.Find(kVision)->name, "vision");
  EXPECT_FALSE(book.Find(kDash).has_value());

  // Added: dash. Revoked: vision.
  Write(File({Entry("dash", "read", kDash)}));
  Later();
  EXPECT_FALSE(book.Find(kVision).has_value());
  ASSERT_TRUE(book.Find(kDash).has_value());
  EXPECT_EQ(book.Find(kDash)->role, TokenRole::kRead);

  // A change that does not parse, or that opens the file to every user,
  // keeps what was read before; the cluster token stays whatever happens.
  Write("{not json");
  Later();
  EXPECT_TRUE(book.Find(kDash).has_value());
  Write(File({Entry("vision", "submit", kVision)}), 0644);
  Later();
  EXPECT_TRUE(book.Find(kDash).has_value());
  EXPECT_FALSE(book.Find(kVision).has_value());
  std::filesystem::remove(path_);
  Later();
  EXPECT_TRUE(book.Find(kDash).has_value());
  EXPECT_TRUE(book.Find("cluster-0123456789abcdef").has_value());
  // Fixed, it is read again.
  Write(File({Entry("vision", "submit", kVision)}));
  Later();
  EXPECT_TRUE(book.Find(kVision).has_value());
  EXPECT_FALSE(book.Find(kDash).has_value());
}

TEST_F(TokenBookTest, AFileItCannotUseIsRefusedAtTheStart) {
  TokenBook missing;
  EXPECT_THAT(missing.Watch(dir_ + "/none").message(), HasSubstr("cannot be read"));
  Write(File({Entry("vision", "submit", kVision)}), 0644);
  TokenBook open;
  EXPECT_THAT(open.Watch(path_).message(), HasSubstr("every user of this host may read"));
  Write(File({Entry("vision", "submit", "cluster-0123456789abcdef")}));
  TokenBook clash("cluster-0123456789abcdef");
  EXPECT_THAT(clash.Watch(path_).message(),
              HasSubstr("the token of 'vision' is the --token-file token"));
}

}  // namespace
}  // namespace hmpmd
