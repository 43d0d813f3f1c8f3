// The worker's word to a driver that a run is done (DataOp::kRunDone):
// what EncodeRunDone writes, DecodeRunDone reads back, and nothing else.
#include <gtest/gtest.h>

#include <string>

#include "hmpmd/protocol/data_frames.h"

namespace hmpmd {
namespace {

TEST(RunDoneNotice, SurvivesTheCodec) {
  const RunDoneNotice sent{"tcp://10.0.0.7:41234", {{7, uint64_t{1} << 40, 3}, {9, 0, 0}}};
  const std::string body = EncodeRunDone(sent);
  Result<RunDoneNotice> got = DecodeRunDone(body.data(), body.size());
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->endpoint, sent.endpoint);
  ASSERT_EQ(got->runs.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(got->runs[i].run, sent.runs[i].run);
    EXPECT_EQ(got->runs[i].bytes, sent.runs[i].bytes);
    EXPECT_EQ(got->runs[i].buffers, sent.runs[i].buffers);
  }
}

TEST(RunDoneNotice, RefusesWhatItDidNotWrite) {
  const std::string ok = EncodeRunDone({"tcp://127.0.0.1:1", {{1, 64, 1}}});
  for (size_t n = 0; n < 20; ++n) {
    EXPECT_FALSE(DecodeRunDone(ok.data(), n).ok()) << n << " bytes";
  }
  const std::string none = EncodeRunDone({"tcp://127.0.0.1:1", {}});
  EXPECT_FALSE(DecodeRunDone(none.data(), none.size()).ok()) << "no runs";
  const std::string too_many =
      EncodeRunDone({"tcp://127.0.0.1:1", {{1, 64, kMaxOutputBuffers + 1}}});
  EXPECT_FALSE(DecodeRunDone(too_many.data(), too_many.size()).ok());
  const std::string over = EncodeRunDone(
      {"tcp://127.0.0.1:1", std::vector<RunDone>(kMaxNoticeRuns + 1, RunDone{1, 64, 1})});
  EXPECT_FALSE(DecodeRunDone(over.data(), over.size()).ok());
  const std::string long_endpoint =
      EncodeRunDone({"tcp://" + std::string(kMaxNoticeEndpoint, 'a'), {{1, 64, 1}}});
  Result<RunDoneNotice> got = DecodeRunDone(long_endpoint.data(), long_endpoint.size());
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("run-done notice"), std::string::npos);
}

TEST(RunDoneNotice, TheLargestIsKMaxNoticeBytes) {
  const std::string largest = EncodeRunDone(
      {std::string(kMaxNoticeEndpoint, 'a'), std::vector<RunDone>(kMaxNoticeRuns, RunDone{})});
  EXPECT_EQ(largest.size(), kMaxNoticeBytes);
  EXPECT_TRUE(DecodeRunDone(largest.data(), largest.size()).ok());
}

TEST(RunDoneNotice, ItsHeaderIsADataHeader) {
  DataHeader h;
  h.op = static_cast<uint8_t>(DataOp::kRunDone);
  EXPECT_TRUE(ParseDataHeader(&h, sizeof(h)).ok());
  h.op = static_cast<uint8_t>(DataOp::kFetchState);  // the last op
  EXPECT_TRUE(ParseDataHeader(&h, sizeof(h)).ok());
  h.op = static_cast<uint8_t>(DataOp::kFetchState) + 1;
  EXPECT_FALSE(ParseDataHeader(&h, sizeof(h)).ok());
}

}  // namespace
}  // namespace hmpmd
