// The tensor pool (hmpmd/protocol/tensor_bytes.h): which recycled buffer a
// request gets, the byte limit, and the object store handing freed outputs
// back. The pool is process-wide: each test starts from an empty one.
#include <gtest/gtest.h>

#include <cstddef>
#include <vector>

#include "hmpmd/protocol/tensor_bytes.h"
#include "object_store.h"

namespace hmpmd::worker {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

class TensorPoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SetTensorPoolLimit(0);  // frees what earlier tests left
    SetTensorPoolLimit(64 * kMiB);
  }
  void TearDown() override { SetTensorPoolLimit(kTensorPoolDefaultBytes); }

  // A recycled buffer of `bytes`, every byte `fill`; returns its address.
  static const std::byte* Give(size_t bytes, std::byte fill) {
    std::vector<std::byte> v(bytes, fill);
    const std::byte* at = v.data();
    RecycleTensorBytes(&v);
    EXPECT_TRUE(v.empty());
    return at;
  }
};

TEST_F(TensorPoolTest, ARequestGetsTheBestFittingRecycledBuffer) {
  const std::byte* big = Give(16 * kMiB, std::byte{1});
  const std::byte* fit = Give(8 * kMiB, std::byte{2});
  EXPECT_EQ(GetTensorPoolStats().held_bytes, 24 * kMiB);
  std::vector<std::byte> v;
  SizeTensorBytesForOverwrite(&v, 6 * kMiB);  // 8 MiB fits best
  EXPECT_EQ(v.data(), fit);
  ASSERT_EQ(v.size(), 6 * kMiB);
  EXPECT_EQ(v[0], std::byte{2});  // what its last user left: no zeroing
  std::vector<std::byte> w;
  SizeTensorBytesForOverwrite(&w, 4 * kMiB);  // 16 MiB is more than twice as large
  EXPECT_NE(w.data(), big);
  EXPECT_EQ(w[0], std::byte{0});
  std::vector<std::byte> x;
  SizeTensorBytesForOverwrite(&x, 16 * kMiB);
  EXPECT_EQ(x.data(), big);
  EXPECT_EQ(GetTensorPoolStats().held_bytes, 0u);
}

TEST_F(TensorPoolTest, SmallBuffersAndNonEmptyVectorsBypassThePool) {
  Give(8 * kMiB, std::byte{3});
  std::vector<std::byte> small(kMiB);
  RecycleTensorBytes(&small);  // under kTensorHugeBytes: not kept
  EXPECT_EQ(GetTensorPoolStats().held_bytes, 8 * kMiB);
  std::vector<std::byte> grown(16, std::byte{9});
  SizeTensorBytesForOverwrite(&grown, 8 * kMiB);  // not empty: resized as it is
  EXPECT_EQ(grown[0], std::byte{9});
  EXPECT_EQ(grown[8 * kMiB - 1], std::byte{0});
  EXPECT_EQ(GetTensorPoolStats().held_bytes, 8 * kMiB);
}

TEST_F(TensorPoolTest, TheLimitEvictsTheOldestBuffers) {
  Give(32 * kMiB, std::byte{1});
  Give(24 * kMiB, std::byte{2});
  Give(16 * kMiB, std::byte{3});  // 72 MiB > 64: the first goes
  EXPECT_EQ(GetTensorPoolStats().held_bytes, 40 * kMiB);
  Give(128 * kMiB, std::byte{4});  // larger than the limit: freed
  EXPECT_EQ(GetTensorPoolStats().held_bytes, 40 * kMiB);
  std::vector<std::byte> v;
  SizeTensorBytesForOverwrite(&v, 32 * kMiB);
  EXPECT_EQ(v[0], std::byte{0});  // a fresh one: the first was evicted
  SetTensorPoolLimit(0);
  EXPECT_EQ(GetTensorPoolStats().held_bytes, 0u);
}

TEST_F(TensorPoolTest, TheStoreHandsFreedOutputsBack) {
  ObjectStore store(0);
  Buffer b;
  b.data.assign(8 * kMiB, std::byte{5});
  ASSERT_TRUE(store.Put(1, 0, {std::move(b)}, 1).ok());
  {
    std::shared_ptr<const BufferList> read = store.Read(1, 0);  // the last read
    ASSERT_NE(read, nullptr);
    EXPECT_EQ(GetTensorPoolStats().held_bytes, 0u);  // still held by the reader
  }
  EXPECT_EQ(GetTensorPoolStats().held_bytes, 8 * kMiB);
  std::vector<std::byte> v;
  SizeTensorBytesForOverwrite(&v, 8 * kMiB);
  EXPECT_EQ(v[0], std::byte{5});  // the stored output's bytes, not fresh zeros
}

}  // namespace
}  // namespace hmpmd::worker
