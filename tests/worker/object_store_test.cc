#include "object_store.h"

#include <gtest/gtest.h>

namespace hmpmd::worker {
namespace {

BufferList Bytes(size_t n) {
  Buffer b;
  b.dtype = "u8";
  b.shape = {static_cast<int64_t>(n)};
  b.data.assign(n, std::byte{1});
  return {b};
}

TEST(ObjectStoreTest, LastReadFreesAnEntry) {
  ObjectStore store(0);
  ASSERT_TRUE(store.Put(1, 0, Bytes(100), 2).ok());
  EXPECT_EQ(store.used_bytes(), 100u);
  auto first = store.Read(1, 0);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(store.entries(), 1u);
  auto second = store.Read(1, 0);
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(store.entries(), 0u);
  EXPECT_EQ(store.used_bytes(), 0u);
  EXPECT_EQ(store.Read(1, 0), nullptr);
  // What a reader holds outlives the entry.
  EXPECT_EQ((*second)[0].data.size(), 100u);
}

TEST(ObjectStoreTest, FinalOutputsStayUntilTheJobIsFreed) {
  ObjectStore store(0);
  ASSERT_TRUE(store.Put(1, 3, Bytes(10), 0).ok());
  ASSERT_TRUE(store.Put(2, 3, Bytes(20), 0).ok());
  for (int i = 0; i < 5; ++i) EXPECT_NE(store.Read(1, 3), nullptr);
  EXPECT_EQ(store.FreeJob(1), 10u);
  EXPECT_EQ(store.Read(1, 3), nullptr);
  EXPECT_NE(store.Read(2, 3), nullptr);
  EXPECT_EQ(store.used_bytes(), 20u);
}

TEST(ObjectStoreTest, CapRefusesWhatDoesNotFitAndRetriesReplace) {
  ObjectStore store(150);
  ASSERT_TRUE(store.Put(1, 0, Bytes(100), 1).ok());
  Status s = store.Put(1, 1, Bytes(100), 1);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("--memory-mb"), std::string::npos) << s.message();
  // A second attempt of run 0 replaces the first, so it fits.
  EXPECT_TRUE(store.Put(1, 0, Bytes(120), 1).ok());
  EXPECT_EQ(store.used_bytes(), 120u);
}

}  // namespace
}  // namespace hmpmd::worker
