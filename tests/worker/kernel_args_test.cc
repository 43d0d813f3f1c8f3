#include "hmpmd/worker/kernel_args.h"

#include <gtest/gtest.h>

namespace hmpmd::worker {
namespace {

Args MakeArgs() {
  return {{"i", int64_t{42}},       {"neg", int64_t{-3}}, {"d", 2.5},    {"whole", 2000.0},
          {"s", std::string("hi")}, {"b", true},          {"huge", 1e30}};
}

TEST(KernelArgsTest, HasSeesEveryNameWhateverItsType) {
  Args raw = MakeArgs();
  KernelArgs args(raw);
  for (const Arg& a : raw) EXPECT_TRUE(args.Has(a.name)) << a.name;
  EXPECT_FALSE(args.Has("missing"));
  EXPECT_FALSE(args.Has(""));
}

TEST(KernelArgsTest, IntConvertsOnlyIntegralValues) {
  Args raw = MakeArgs();
  KernelArgs args(raw);
  EXPECT_EQ(args.Int("i", 0), 42);
  EXPECT_EQ(args.Int("neg", 0), -3);
  EXPECT_EQ(args.Int("whole", 0), 2000);
  EXPECT_EQ(args.Int("d", 7), 7);     // 2.5 is not integral
  EXPECT_EQ(args.Int("huge", 7), 7);  // out of range
  EXPECT_EQ(args.Int("s", 7), 7);     // wrong type
  EXPECT_EQ(args.Int("missing", 7), 7);
}

TEST(KernelArgsTest, NumberReadsIntegersAndFloats) {
  Args raw = MakeArgs();
  KernelArgs args(raw);
  EXPECT_DOUBLE_EQ(args.Number("i", 0), 42.0);
  EXPECT_DOUBLE_EQ(args.Number("d", 0), 2.5);
  EXPECT_DOUBLE_EQ(args.Number("b", -1), -1.0);
  EXPECT_DOUBLE_EQ(args.Number("missing", -1), -1.0);
}

TEST(KernelArgsTest, StringAndBoolReadOnlyTheirType) {
  Args raw = MakeArgs();
  KernelArgs args(raw);
  EXPECT_EQ(args.String("s", "x"), "hi");
  EXPECT_EQ(args.String("i", "x"), "x");
  EXPECT_EQ(args.String("missing", "x"), "x");
  EXPECT_TRUE(args.Bool("b", false));
  EXPECT_FALSE(args.Bool("i", false));
  EXPECT_TRUE(args.Bool("missing", true));
}

TEST(KernelArgsTest, FirstOfDuplicateNamesWinsAndRawArgsAreKept) {
  Args raw = {{"x", int64_t{1}}, {"x", int64_t{2}}};
  KernelArgs args(raw);
  EXPECT_EQ(args.Int("x", 0), 1);
  EXPECT_EQ(&args.args(), &raw);
}

}  // namespace
}  // namespace hmpmd::worker
