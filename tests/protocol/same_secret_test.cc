// SameSecret: the one comparison of the controller's token.
#include "hmpmd/protocol/same_secret.h"

#include <gtest/gtest.h>

#include <string>

namespace hmpmd {
namespace {

TEST(SameSecretTest, EqualSecretsMatch) {
  EXPECT_TRUE(SameSecret("s3cret", "s3cret"));
  EXPECT_TRUE(SameSecret("", ""));
  // Bytes, not C strings: an embedded NUL is compared like any byte.
  EXPECT_TRUE(SameSecret(std::string("a\0b", 3), std::string("a\0b", 3)));
}

TEST(SameSecretTest, ADifferenceAnywhereOrInLengthDoesNotMatch) {
  EXPECT_FALSE(SameSecret("s3cret", "x3cret"));  // first byte
  EXPECT_FALSE(SameSecret("s3cret", "s3creT"));  // last byte
  EXPECT_FALSE(SameSecret("s3cret", "s3cre"));   // a prefix
  EXPECT_FALSE(SameSecret("s3cret", "s3crets"));
  EXPECT_FALSE(SameSecret("s3cret", ""));
  EXPECT_FALSE(SameSecret("", "s3cret"));
  EXPECT_FALSE(SameSecret(std::string("a\0b", 3), std::string("a\0c", 3)));
}

}  // namespace
}  // namespace hmpmd
