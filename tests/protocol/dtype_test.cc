#include "hmpmd/protocol/dtype.h"

#include <gtest/gtest.h>

#include <cstring>

#include "hmpmd/protocol/data_frames.h"

namespace hmpmd {
namespace {

std::vector<std::byte> Bytes(size_t n) {
  std::vector<std::byte> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>(i);
  return v;
}

TEST(Dtype, KnownNamesHaveTheirItemSizes) {
  ASSERT_NE(FindDtype("f32"), nullptr);
  EXPECT_EQ(FindDtype("f32")->itemsize, 4u);
  EXPECT_EQ(FindDtype("f16")->itemsize, 2u);
  EXPECT_EQ(FindDtype("i64")->itemsize, 8u);
  EXPECT_EQ(FindDtype("bool")->format, "?");
  EXPECT_EQ(FindDtype("bytes")->kind, 'V');
  EXPECT_EQ(FindDtype("float32"), nullptr);
  EXPECT_EQ(FindDtype(""), nullptr);
}

TEST(Dtype, NumpyKindAndSizeMapBackToTheName) {
  for (const DtypeInfo& d : KnownDtypes()) {
    if (d.kind == 'V') {
      EXPECT_EQ(DtypeOfKind('V', 1), nullptr);  // raw bytes are not an array dtype
      continue;
    }
    const DtypeInfo* back = DtypeOfKind(d.kind, d.itemsize);
    ASSERT_NE(back, nullptr) << d.name;
    EXPECT_EQ(back->name, d.name);
  }
  EXPECT_EQ(DtypeOfKind('c', 8), nullptr);  // complex64: no name
  EXPECT_EQ(DtypeOfKind('f', 16), nullptr);
}

TEST(Dtype, CheckLayoutAcceptsAShapeThatDescribesTheBytes) {
  Buffer b{Bytes(24), {2, 3}, "f32"};
  EXPECT_TRUE(CheckLayout(b).ok());
  Buffer scalar{Bytes(8), {}, "f64"};  // rank 0: one element
  EXPECT_TRUE(CheckLayout(scalar).ok());
  Buffer empty{{}, {0, 5}, "i32"};
  EXPECT_TRUE(CheckLayout(empty).ok());
}

TEST(Dtype, CheckLayoutNamesWhatDoesNotMatch) {
  Status s = CheckLayout(Buffer{Bytes(20), {2, 3}, "f32"});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "shape [2, 3] of f32 is 24 bytes, the data 20");
  EXPECT_EQ(CheckLayout(Buffer{Bytes(4), {1}, "q8"}).message(), "dtype 'q8' is not a known dtype");
  EXPECT_EQ(CheckLayout(Buffer{Bytes(4), {-1}, "u8"}).message(),
            "shape [-1]: a negative dimension");
}

TEST(Dtype, CheckLayoutRefusesAShapeWhoseSizeOverflows) {
  // 2^62 x 4 bytes wraps to 0 in 64 bits: it must not pass for no data.
  Status s = CheckLayout(Buffer{{}, {int64_t{1} << 62, 4}, "f32"});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("overflows"), std::string::npos) << s.message();
}

TEST(Dtype, MakeTensorCopiesAndChecks) {
  const std::vector<std::byte> data = Bytes(12);
  Result<Buffer> t = MakeTensor("i32", {3}, data);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->data, data);
  EXPECT_EQ(t->shape, (std::vector<int64_t>{3}));
  EXPECT_EQ(t->dtype, "i32");
  EXPECT_FALSE(MakeTensor("i32", {4}, data).ok());
}

TEST(Dtype, BytesBufferHasItsSizeAsShape) {
  Buffer b = BytesBuffer(Bytes(5));
  EXPECT_EQ(b.dtype, "bytes");
  EXPECT_EQ(b.shape, (std::vector<int64_t>{5}));
  EXPECT_TRUE(CheckLayout(b).ok());
}

TEST(Dtype, DtypeAndShapeSurviveTheMetaCodec) {
  // What a fetch reply carries for each buffer: the receiver sees the same
  // dtype and shape, so it can rebuild the array.
  std::vector<Buffer> sent = {Buffer{Bytes(16), {2, 2}, "f32"}, BytesBuffer(Bytes(3)),
                              Buffer{Bytes(2), {2}, "bool"}, Buffer{Bytes(8), {}, "u64"}};
  const std::string meta = EncodeMeta(sent);
  std::vector<Buffer> got;
  std::vector<uint64_t> sizes;
  ASSERT_TRUE(DecodeMeta(meta.data(), meta.size(), &got, &sizes).ok());
  ASSERT_EQ(got.size(), sent.size());
  for (size_t i = 0; i < sent.size(); ++i) {
    EXPECT_EQ(got[i].dtype, sent[i].dtype);
    EXPECT_EQ(got[i].shape, sent[i].shape);
    EXPECT_EQ(sizes[i], sent[i].data.size());
  }
}

}  // namespace
}  // namespace hmpmd
