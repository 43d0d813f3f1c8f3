// SplitAddresses: a primary's address and its standbys', as every door
// takes them.
#include "hmpmd/protocol/address_list.h"

#include <gtest/gtest.h>

namespace hmpmd {
namespace {

using List = std::vector<std::string>;

TEST(SplitAddressesTest, SplitsAtCommasAndKeepsEmptyOnesForTheCheck) {
  EXPECT_EQ(SplitAddresses("tcp://a:1"), (List{"tcp://a:1"}));
  EXPECT_EQ(SplitAddresses("tcp://a:1,tcp://b:2"), (List{"tcp://a:1", "tcp://b:2"}));
  EXPECT_EQ(SplitAddresses(""), (List{""}));
  EXPECT_EQ(SplitAddresses("tcp://a:1,"), (List{"tcp://a:1", ""}));
  EXPECT_EQ(SplitAddresses(",x"), (List{"", "x"}));
}

}  // namespace
}  // namespace hmpmd
