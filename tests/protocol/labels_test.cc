#include "hmpmd/protocol/labels.h"

#include <gtest/gtest.h>

#include <string>

namespace hmpmd {
namespace {

TEST(LabelsTest, FlagSplitsAtTheFirstEquals) {
  Result<Label> l = ParseLabelFlag("accel=910c=x");
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->key, "accel");
  EXPECT_EQ(l->value, "910c=x");
}

TEST(LabelsTest, BadFlagsAreRefusedNamingTheFlag) {
  const struct {
    std::string text;
    std::string needle;
  } cases[] = {
      {"accel", "--label: expected KEY=VALUE, found no '='"},
      {"=910c", "--label: key: empty"},
      {"accel=", "--label: value: empty"},
      {"ac\ncel=1", "--label: key: contains the control character U+000A"},
      {"accel=9\x7f", "--label: value: contains the control character U+007F"},
      {"accel=" + std::string(kMaxLabelBytes + 1, 'x'), "--label: value: longer than the limit"},
      {"accel=\xff", "--label: value: is not valid UTF-8"},
  };
  for (const auto& c : cases) {
    Result<Label> l = ParseLabelFlag(c.text);
    ASSERT_FALSE(l.ok()) << c.text;
    EXPECT_EQ(l.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(l.status().message().find(c.needle), std::string::npos) << l.status().message();
  }
}

TEST(LabelsTest, AddKeepsKeysSortedAndRefusesAConflict) {
  Labels labels;
  ASSERT_TRUE(AddLabel("x", {"zone", "a"}, &labels).ok());
  ASSERT_TRUE(AddLabel("x", {"accel", "910c"}, &labels).ok());
  ASSERT_TRUE(AddLabel("x", {"accel", "910c"}, &labels).ok());  // the same pair again
  EXPECT_EQ(labels, (Labels{{"accel", "910c"}, {"zone", "a"}}));
  Status st = AddLabel("requires", {"accel", "910b"}, &labels);
  EXPECT_EQ(st.message(), "requires: accel=910b conflicts with accel=910c");
  EXPECT_EQ(LabelsText(labels), "accel=910c, zone=a");
}

TEST(LabelsTest, AddRefusesMoreThanTheLimit) {
  Labels labels;
  for (size_t i = 0; i < kMaxLabels; ++i) {
    ASSERT_TRUE(AddLabel("x", {"k" + std::to_string(i), "v"}, &labels).ok());
  }
  EXPECT_FALSE(AddLabel("x", {"one-more", "v"}, &labels).ok());
}

TEST(LabelsTest, HasLabelsNeedsEveryPair) {
  const Labels device = {{"accel", "910c"}, {"rack", "r1"}, {"zone", "a"}};
  EXPECT_TRUE(HasLabels(device, {}));
  EXPECT_TRUE(HasLabels(device, {{"accel", "910c"}, {"zone", "a"}}));
  EXPECT_FALSE(HasLabels(device, {{"accel", "910b"}}));
  EXPECT_FALSE(HasLabels(device, {{"accel", "910c"}, {"host", "h"}}));
  EXPECT_FALSE(HasLabels({}, {{"accel", "910c"}}));
}

}  // namespace
}  // namespace hmpmd
