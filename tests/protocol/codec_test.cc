// Tests for the versioned msgpack codec (protocol/codec.{h,cc}).
//
// Bodies that the encoder would never produce are written byte by byte with
// MsgpackWriter, so these tests also pin the wire format.
#include "hmpmd/protocol/codec.h"

#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace hmpmd {
namespace {

// Writes msgpack bytes by hand (big-endian, smallest encoding first).
class MsgpackWriter {
 public:
  MsgpackWriter& Array(uint32_t n) {
    if (n < 16) return Byte(0x90 | n);
    if (n <= 0xffff) return Byte(0xdc).Be(n, 2);
    return Byte(0xdd).Be(n, 4);
  }
  MsgpackWriter& Map(uint32_t n) { return Byte(0x80 | n); }
  MsgpackWriter& Uint(uint64_t v) {
    if (v < 128) return Byte(static_cast<uint8_t>(v));
    if (v <= 0xff) return Byte(0xcc).Be(v, 1);
    if (v <= 0xffff) return Byte(0xcd).Be(v, 2);
    if (v <= 0xffffffffu) return Byte(0xce).Be(v, 4);
    return Byte(0xcf).Be(v, 8);
  }
  MsgpackWriter& Int(int64_t v) {
    if (v >= 0) return Uint(static_cast<uint64_t>(v));
    if (v >= -32) return Byte(static_cast<uint8_t>(v));
    return Byte(0xd3).Be(static_cast<uint64_t>(v), 8);
  }
  MsgpackWriter& Str(std::string_view s) {
    if (s.size() < 32) {
      Byte(0xa0 | static_cast<uint8_t>(s.size()));
    } else if (s.size() <= 0xff) {
      Byte(0xd9).Be(s.size(), 1);
    } else {
      Byte(0xda).Be(s.size(), 2);
    }
    bytes_.append(s);
    return *this;
  }
  MsgpackWriter& Bool(bool b) { return Byte(b ? 0xc3 : 0xc2); }
  MsgpackWriter& Nil() { return Byte(0xc0); }
  MsgpackWriter& F64(double d) { return Byte(0xcb).Be(std::bit_cast<uint64_t>(d), 8); }
  MsgpackWriter& F32(float f) { return Byte(0xca).Be(std::bit_cast<uint32_t>(f), 4); }
  MsgpackWriter& Byte(uint8_t b) {
    bytes_.push_back(static_cast<char>(b));
    return *this;
  }
  const std::string& bytes() const { return bytes_; }

 private:
  MsgpackWriter& Be(uint64_t v, int n) {
    for (int i = n - 1; i >= 0; --i) bytes_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
    return *this;
  }
  std::string bytes_;
};

// A TaskAssign whose args hold every ArgValue alternative, edge values included.
TaskAssign AssignWithEveryArgType() {
  TaskAssign t;
  t.task_id = "vision/3";
  t.job = 12;
  t.task = 345;
  t.attempt = 2;
  t.kernel = "gemm";
  t.core = CoreKind::kVector;
  t.lane = 3;
  t.args = {
      {"m", int64_t{256}},
      {"neg", int64_t{-7}},
      {"neg_big", int64_t{-40000}},
      {"min", std::numeric_limits<int64_t>::min()},
      {"max", std::numeric_limits<int64_t>::max()},
      {"scale", -2.5},
      {"huge", 1e300},
      {"integral_above_int64", 1e19},  // an integral double past INT64_MAX
      {"tiny", -4.9e-324},
      {"integral_float", 3.0},  // must come back a double, not an int
      {"on", true},
      {"off", false},
      {"empty", std::string()},
      {"text", std::string("h\xc3\xa9llo\0world", 12)},  // UTF-8 and an embedded NUL
  };
  return t;
}

// One or more non-trivial values of every Message alternative.
std::vector<Message> SampleMessages() {
  std::vector<Message> out;
  out.push_back(RegisterMsg{
      .name = "host-a:4242",
      .token = "s3cr3t-t0ken",
      .pid = 4242,
      .cores = {{CoreKind::kCube, 2}, {CoreKind::kVector, 4}},
      .memory_mb = uint64_t{1} << 40,
      .kernels = {"noop", "gemm", "send", "allreduce"},
      .data_endpoint = "tcp://10.0.0.1:6000",
      .sent_us = -123456789012,
      .held = {{7, 3, 1, CoreKind::kVector, 2}, {9, 0, 0, CoreKind::kCube, 0}},
      .outputs = {{7, 2, uint64_t{1} << 33}, {9, 0, 0}},
      .epoch = 0x0123456789abcdefULL,
      .instance = 0xfedcba9876543210ULL,
      .started = {{7, 3, 1, CoreKind::kVector, 2}},
      .labels = {{"accel", "910c"}, {"zone", "r\xc3\xa9gion-a"}},
      .states = {{7, "stage0"}, {9, ""}},
  });
  out.push_back(RegisterMsg{});  // every field at its zero value
  out.push_back(RegisterAck{.worker_id = std::numeric_limits<uint32_t>::max(),
                            .heartbeat_ms = 250,
                            .epoch = std::numeric_limits<uint64_t>::max(),
                            .data_token = {std::numeric_limits<uint64_t>::max(), 0x5a}});
  out.push_back(Reject{.reason = "unknown worker 9", .reregister = true});
  out.push_back(Reject{.reason = "", .reregister = false});
  out.push_back(Heartbeat{.worker_id = 7,
                          .running = 3,
                          .dropped_frames = std::numeric_limits<uint64_t>::max(),
                          .sent_us = std::numeric_limits<int64_t>::min(),
                          .store_bytes = uint64_t{5} << 40,
                          .state_bytes = uint64_t{3} << 30,
                          .started = {{7, 3, 1, CoreKind::kVector, 2},
                                      {std::numeric_limits<JobId>::max(), 0, 4, CoreKind::kCube,
                                       std::numeric_limits<uint32_t>::max()}}});
  out.push_back(HeartbeatAck{});
  TaskAssign plain;
  plain.job = 1;
  plain.kernel = "noop";
  TaskAssign member;
  member.job = 2;
  member.kernel = "allreduce";
  member.inputs = {{.run = 4, .endpoint = "tcp://10.0.0.2:7000", .bytes = uint64_t{1} << 33}};
  member.reads = TaskAssign::kDropOutputs;
  member.gang = {.rank = 1, .endpoints = {"tcp://a:1", "tcp://b:2"}, .tag = ~uint64_t{0}};
  member.submodel = "actor";
  member.keeps_state = true;
  member.state_from = "tcp://10.0.0.3:7001";
  out.push_back(AssignBatch{.tasks = {AssignWithEveryArgType(), plain, member}});
  out.push_back(AssignBatch{});
  out.push_back(DoneBatch{
      .worker_id = 3,
      .results = {TaskResult{.job = 1,
                             .task = 2,
                             .attempt = 0,
                             .ok = true,
                             .start_us = 100,
                             .end_us = 200,
                             .error = ""},
                  TaskResult{.job = 1,
                             .task = 3,
                             .attempt = 1,
                             .ok = false,
                             .start_us = -5,
                             .end_us = 7,
                             .error = "kernel 'gemm': m must be > 0",
                             .output_bytes = 4096},
                  TaskResult{.job = 2,
                             .task = 5,
                             .attempt = 2,
                             .ok = false,
                             .error = "input: no outputs of job 2 run 4 in this worker's store",
                             .lost_inputs = {4, std::numeric_limits<uint32_t>::max()}},
                  TaskResult{.job = 3,
                             .task = 1,
                             .ok = false,
                             .error = "collective: nothing from rank 1 within 500 ms",
                             .retryable = true},
                  TaskResult{.job = 3,
                             .task = 2,
                             .ok = true,
                             .state_held = true,
                             .state_load_start_us = 10,
                             .state_load_end_us = 30,
                             .state_load_bytes = uint64_t{1} << 35}},
      .sent_us = 999,
      .started = {{1, 4, 0, CoreKind::kCube, 0}},
  });
  out.push_back(CancelJob{.job = std::numeric_limits<uint32_t>::max()});
  out.push_back(Shutdown{.reason = "controller exiting"});
  out.push_back(FreeJob{.job = 12});
  out.push_back(
      SessionOpen{.name = "rl", .token = "s", .weight = 2, .heartbeat_ms = 500, .sent_us = 3});
  out.push_back(SessionAck{.job = 4, .error = "", .code = 0, .data_token = {0x1234, 0x5678}});
  out.push_back(SessionSubmit{
      .job = 4,
      .groups = {{.seq = 9,
                  .submodels = {{.name = "learner", .kind = 6, .devices = 2}},
                  .tasks = {{.id = "t0",
                             .submodel = "learner",
                             .kernel = "gemm",
                             .core = CoreKind::kVector,
                             .inputs = {"a", "b"},
                             .args = {{"n", int64_t{8}}},
                             .flops = 0.0,  // an integral double stays a float on the wire
                             .bytes = 2.5,
                             .group = "g",
                             .op = "allreduce",
                             .group_bytes = 1e6}}}}});
  out.push_back(SessionControl{
      .job = 4, .release = {1, 2}, .cancel = {3}, .close = SessionControl::kClose, .sent_us = 8});
  out.push_back(SessionUpdate{.job = 4,
                              .acks = {{.seq = 9, .first_task = 0, .error = ""}},
                              .ended = {{.task = 0,
                                         .state = TaskEnded::kDone,
                                         .error = "",
                                         .endpoint = "tcp://127.0.0.1:1",
                                         .output_bytes = 64}},
                              .closed = true,
                              .job_state = "succeeded",
                              .job_error = ""});
  out.push_back(FreeRuns{.job = 4, .runs = {0, 7}});
  out.push_back(CancelRuns{.job = 4, .runs = {3}});
  return out;
}

class CodecTest : public ::testing::Test {
 protected:
  static std::string Header(MsgType type) { return EncodeHeader(type); }
  static std::string Header(uint8_t version, uint8_t type) {
    return std::string{'H', 'M', static_cast<char>(version), static_cast<char>(type)};
  }

  // Decodes, turning any exception into a test failure.
  static Result<Message> SafeDecode(std::string_view header, std::string_view body,
                                    const DecodeLimits& limits = {}) {
    try {
      return Decode(header, body, limits);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "Decode threw: " << e.what();
    } catch (...) {
      ADD_FAILURE() << "Decode threw a non-std exception";
    }
    return Status::Internal("threw");
  }

  // The decoded message must re-encode to bytes that decode to the same bytes
  // again; compares bytes so NaN payloads do not break equality.
  static void ExpectStableReencoding(const Message& decoded) {
    EncodedFrames once = Encode(decoded);
    Result<Message> again = SafeDecode(once.header, once.body);
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    EncodedFrames twice = Encode(*again);
    EXPECT_EQ(once.header, twice.header);
    EXPECT_EQ(once.body, twice.body);
  }

  static void ExpectCorruption(const Result<Message>& r, std::string_view needle) {
    ASSERT_FALSE(r.ok()) << "decoded a frame that should be rejected";
    EXPECT_EQ(r.status().code(), StatusCode::kCorruption) << r.status().ToString();
    EXPECT_NE(r.status().message().find(needle), std::string::npos)
        << "message '" << r.status().message() << "' lacks '" << needle << "'";
  }

  static void LogSeed(const char* what, uint64_t seed) {
    std::printf("[   SEED   ] %s seed=%llu\n", what, static_cast<unsigned long long>(seed));
    ::testing::Test::RecordProperty(what, std::to_string(seed));
  }
};

TEST_F(CodecTest, SamplesCoverEveryMessageType) {
  std::set<size_t> seen;
  for (const Message& m : SampleMessages()) seen.insert(m.index());
  EXPECT_EQ(seen.size(), std::variant_size_v<Message>)
      << "add a sample for each new Message alternative";
}

TEST_F(CodecTest, RoundTripPreservesEveryMessageType) {
  for (const Message& m : SampleMessages()) {
    SCOPED_TRACE(std::string(MsgTypeName(TypeOf(m))));
    EncodedFrames f = Encode(m);
    ASSERT_EQ(f.header.size(), kHeaderSize);
    EXPECT_EQ(static_cast<uint8_t>(f.header[3]), static_cast<uint8_t>(TypeOf(m)));
    Result<Message> back = SafeDecode(f.header, f.body);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(back->index(), m.index());
    EXPECT_TRUE(*back == m);
  }
}

TEST_F(CodecTest, RoundTripKeepsArgTypesAndValues) {
  TaskAssign sent = AssignWithEveryArgType();
  EncodedFrames f = Encode(AssignBatch{.tasks = {sent}});
  Result<Message> back = SafeDecode(f.header, f.body);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  const TaskAssign& got = std::get<AssignBatch>(*back).tasks.at(0);
  ASSERT_EQ(got.args.size(), sent.args.size());
  for (size_t i = 0; i < sent.args.size(); ++i) {
    SCOPED_TRACE(sent.args[i].name);
    EXPECT_EQ(got.args[i].name, sent.args[i].name);
    EXPECT_EQ(got.args[i].value.index(), sent.args[i].value.index());
    EXPECT_TRUE(got.args[i].value == sent.args[i].value);
  }
  EXPECT_EQ(std::get<std::string>(got.args.back().value).size(), 12u);
  EXPECT_EQ(got.core, CoreKind::kVector);
}

TEST_F(CodecTest, EncodedSizeOfAGroupIsWhatItTakesInASessionSubmit) {
  // Strings and numbers on each side of msgpack's size classes.
  SubmitGroup g{.seq = uint64_t{1} << 40, .submodels = {{"enc", 1, 70000, true}}};
  for (size_t n : {0, 31, 32, 255, 256, 65535, 65536}) {
    WireTask t{.id = std::string(n, 'i'), .submodel = "default", .kernel = "k"};
    t.inputs.assign(n % 20, "x");
    t.args = {{"i", int64_t{-1} << 40},
              {"u", static_cast<int64_t>(n)},
              {"d", 3.0},
              {"b", true},
              {"s", std::string(n, 's')}};
    g.tasks.push_back(t);
  }
  for (SubmitGroup group : {SubmitGroup{}, g}) {
    const size_t alone = Encode(SessionSubmit{.job = 1, .groups = {}}).body.size();
    const size_t with = Encode(SessionSubmit{.job = 1, .groups = {group}}).body.size();
    EXPECT_EQ(EncodedSize(group), with - alone);
  }
}

TEST_F(CodecTest, HeaderIsMagicVersionType) {
  std::string h = EncodeHeader(MsgType::kDoneBatch);
  ASSERT_EQ(h.size(), 4u);
  EXPECT_EQ(h[0], 'H');
  EXPECT_EQ(h[1], 'M');
  EXPECT_EQ(static_cast<uint8_t>(h[2]), kProtocolVersion);
  EXPECT_EQ(static_cast<uint8_t>(h[3]), 7);
}

TEST_F(CodecTest, TypeOfAndNamesFollowVariantOrder) {
  const std::vector<std::pair<MsgType, std::string>> names = {
      {MsgType::kRegister, "Register"},
      {MsgType::kRegisterAck, "RegisterAck"},
      {MsgType::kReject, "Reject"},
      {MsgType::kHeartbeat, "Heartbeat"},
      {MsgType::kHeartbeatAck, "HeartbeatAck"},
      {MsgType::kAssignBatch, "AssignBatch"},
      {MsgType::kDoneBatch, "DoneBatch"},
      {MsgType::kCancelJob, "CancelJob"},
      {MsgType::kShutdown, "Shutdown"},
      {MsgType::kFreeJob, "FreeJob"},
      {MsgType::kSessionOpen, "SessionOpen"},
      {MsgType::kSessionAck, "SessionAck"},
      {MsgType::kSessionSubmit, "SessionSubmit"},
      {MsgType::kSessionControl, "SessionControl"},
      {MsgType::kSessionUpdate, "SessionUpdate"},
      {MsgType::kFreeRuns, "FreeRuns"},
      {MsgType::kCancelRuns, "CancelRuns"},
  };
  for (const auto& [type, name] : names) EXPECT_EQ(MsgTypeName(type), name);
  EXPECT_EQ(MsgTypeName(static_cast<MsgType>(0)), "Unknown");
  EXPECT_EQ(TypeOf(Message(Shutdown{})), MsgType::kShutdown);
  EXPECT_EQ(TypeOf(Message(RegisterMsg{})), MsgType::kRegister);
  EXPECT_EQ(TypeOf(Message(DoneBatch{})), MsgType::kDoneBatch);
}

TEST_F(CodecTest, EncodeBodyAppendsToExistingBytes) {
  std::string out = "prefix";
  EncodeBody(Shutdown{.reason = "bye"}, &out);
  EXPECT_EQ(out.substr(0, 6), "prefix");
  EXPECT_EQ(out.substr(6), Encode(Shutdown{.reason = "bye"}).body);
}

TEST_F(CodecTest, SpanOverloadDecodesLikeStringView) {
  EncodedFrames f = Encode(Heartbeat{.worker_id = 5, .running = 1});
  std::vector<std::byte> header(f.header.size()), body(f.body.size());
  std::memcpy(header.data(), f.header.data(), header.size());
  std::memcpy(body.data(), f.body.data(), body.size());
  Result<Message> r = Decode(std::span<const std::byte>(header), std::span<const std::byte>(body));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(std::get<Heartbeat>(*r).worker_id, 5u);
}

TEST_F(CodecTest, TruncatedBodyAtEveryLengthIsCorruption) {
  for (const Message& m : SampleMessages()) {
    EncodedFrames f = Encode(m);
    for (size_t len = 0; len < f.body.size(); ++len) {
      SCOPED_TRACE(std::string(MsgTypeName(TypeOf(m))) + " truncated to " + std::to_string(len) +
                   " of " + std::to_string(f.body.size()));
      Result<Message> r = SafeDecode(f.header, std::string_view(f.body).substr(0, len));
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
    }
  }
}

TEST_F(CodecTest, HeaderOfWrongSizeIsRejected) {
  std::string body = Encode(Shutdown{}).body;
  for (std::string h : {std::string(), std::string("HM\x01"), std::string("HM\x01\x09\x00", 5)}) {
    ExpectCorruption(SafeDecode(h, body), "header: wrong size");
  }
}

TEST_F(CodecTest, WrongMagicIsRejected) {
  std::string body = Encode(Shutdown{}).body;
  ExpectCorruption(SafeDecode(std::string{'X', 'M', 1, 9}, body), "bad magic");
  ExpectCorruption(SafeDecode(std::string{'H', 'm', 1, 9}, body), "bad magic");
}

TEST_F(CodecTest, WrongVersionIsRejectedNamingTheVersion) {
  std::string body = Encode(Shutdown{}).body;
  const uint8_t other = kProtocolVersion + 1;
  Result<Message> r = SafeDecode(Header(other, 9), body);
  ExpectCorruption(r, "protocol version " + std::to_string(other));
  EXPECT_NE(r.status().message().find("expected " + std::to_string(kProtocolVersion)),
            std::string::npos);
  ExpectCorruption(SafeDecode(Header(0, 9), body), "protocol version 0");
  ExpectCorruption(SafeDecode(Header(255, 9), body), "protocol version 255");
}

TEST_F(CodecTest, UnknownTypeByteIsRejected) {
  std::string body = Encode(Shutdown{}).body;
  for (int type : {0, static_cast<int>(std::variant_size_v<Message>) + 1, 200, 255}) {
    ExpectCorruption(SafeDecode(Header(kProtocolVersion, static_cast<uint8_t>(type)), body),
                     "unknown message type " + std::to_string(type));
  }
}

TEST_F(CodecTest, TrailingBytesAreRejected) {
  EncodedFrames f = Encode(RegisterAck{.worker_id = 1, .heartbeat_ms = 2});
  ExpectCorruption(SafeDecode(f.header, f.body + '\xc0'), "trailing bytes");
  ExpectCorruption(SafeDecode(f.header, f.body + f.body), "trailing bytes");
}

TEST_F(CodecTest, WrongFieldCountIsRejected) {
  std::string h = Header(MsgType::kReject);
  ExpectCorruption(SafeDecode(h, MsgpackWriter().Array(3).Str("x").Bool(true).Uint(1).bytes()),
                   "expected an array of 2 fields");
  ExpectCorruption(SafeDecode(h, MsgpackWriter().Array(1).Str("x").bytes()),
                   "expected an array of 2 fields");
  // Not an array at all.
  ExpectCorruption(SafeDecode(h, MsgpackWriter().Str("x").bytes()),
                   "expected an array of 2 fields");
  // A nested struct with a missing field: a TaskResult of 6 fields.
  std::string done = MsgpackWriter()
                         .Array(4)
                         .Uint(1)
                         .Array(1)
                         .Array(6)
                         .Uint(1)
                         .Uint(2)
                         .Uint(0)
                         .Bool(true)
                         .Int(1)
                         .Int(2)
                         .Int(0)
                         .Array(0)
                         .bytes();
  ExpectCorruption(SafeDecode(Header(MsgType::kDoneBatch), done), "expected an array of 17 fields");
  // HeartbeatAck has no fields; one is too many.
  ExpectCorruption(
      SafeDecode(Header(MsgType::kHeartbeatAck), MsgpackWriter().Array(1).Nil().bytes()),
      "expected an array of 0 fields");
}

TEST_F(CodecTest, WrongFieldTypesAreRejected) {
  struct Case {
    MsgType type;
    std::string body;
    std::string needle;
  };
  auto heartbeat = [](auto&& fill) {
    MsgpackWriter w;
    w.Array(7);
    fill(w);
    w.Uint(0);   // store_bytes
    w.Array(0);  // started: none
    w.Uint(0);   // state_bytes
    return w.bytes();
  };
  const std::vector<Case> cases = {
      {MsgType::kReject, MsgpackWriter().Array(2).Uint(1).Bool(true).bytes(), "expected a string"},
      {MsgType::kReject, MsgpackWriter().Array(2).Str("x").Uint(1).bytes(), "expected a bool"},
      {MsgType::kHeartbeat, heartbeat([](MsgpackWriter& w) { w.Int(-1).Uint(0).Uint(0).Int(0); }),
       "expected an unsigned integer"},
      {MsgType::kHeartbeat,
       heartbeat([](MsgpackWriter& w) { w.Uint(uint64_t{1} << 32).Uint(0).Uint(0).Int(0); }),
       "integer out of range"},
      {MsgType::kHeartbeat, heartbeat([](MsgpackWriter& w) { w.F64(1.0).Uint(0).Uint(0).Int(0); }),
       "expected an unsigned integer"},
      {MsgType::kHeartbeat,
       heartbeat([](MsgpackWriter& w) { w.Uint(1).Uint(0).Uint(0).Str("now"); }),
       "expected an integer"},
      {MsgType::kHeartbeat, heartbeat([](MsgpackWriter& w) { w.Uint(1).Uint(0).Uint(0).F64(1.5); }),
       "expected an integer"},
      {MsgType::kHeartbeat, heartbeat([](MsgpackWriter& w) {
         w.Uint(1).Uint(0).Uint(0).Uint(uint64_t{1} << 63);  // above INT64_MAX
       }),
       "integer out of range"},
      {MsgType::kCancelJob, MsgpackWriter().Array(1).Nil().bytes(), "expected an unsigned integer"},
      {MsgType::kDoneBatch, MsgpackWriter().Array(4).Uint(1).Uint(5).Int(0).Array(0).bytes(),
       "expected an array"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(MsgTypeName(c.type)) + " expecting '" + c.needle + "'");
    ExpectCorruption(SafeDecode(Header(c.type), c.body), c.needle);
  }
}

// A Register body with the given cores and kernels arrays written by `fill`.
std::string RegisterBody(const std::function<void(MsgpackWriter&)>& cores,
                         const std::function<void(MsgpackWriter&)>& kernels) {
  MsgpackWriter w;
  w.Array(15).Str("n").Str("").Uint(1);
  cores(w);
  w.Uint(0);
  kernels(w);
  w.Str("").Int(0).Array(0).Array(0);            // held, outputs: none
  w.Uint(0);                                     // epoch: none
  w.Uint(0);                                     // instance: not given
  w.Array(0);                                    // started: none
  w.Array(1).Array(2).Str("accel").Str("910c");  // labels
  w.Array(1).Array(2).Uint(3).Str("stage0");     // states
  return w.bytes();
}

TEST_F(CodecTest, RegisterBodyWrittenByHandDecodes) {
  std::string body = RegisterBody(
      [](MsgpackWriter& w) { w.Array(2).Array(2).Uint(0).Uint(1).Array(2).Uint(1).Uint(3); },
      [](MsgpackWriter& w) { w.Array(1).Str("spin"); });
  Result<Message> r = SafeDecode(Header(MsgType::kRegister), body);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const RegisterMsg& m = std::get<RegisterMsg>(*r);
  ASSERT_EQ(m.cores.size(), 2u);
  EXPECT_EQ(m.cores[1].kind, CoreKind::kVector);
  EXPECT_EQ(m.cores[1].count, 3u);
  EXPECT_EQ(m.kernels, std::vector<std::string>{"spin"});
  EXPECT_EQ(m.labels, (Labels{{"accel", "910c"}}));
  EXPECT_EQ(m.states, (std::vector<HeldState>{{3, "stage0"}}));
}

// A version-13 register (no labels) is one field short: refused, not taken
// for a worker without labels.
TEST_F(CodecTest, RegisterBodyWithoutLabelsIsRejected) {
  MsgpackWriter w;
  w.Array(13).Str("n").Str("").Uint(1).Array(1).Array(2).Uint(0).Uint(1).Uint(0);
  w.Array(1).Str("spin").Str("").Int(0).Array(0).Array(0).Uint(0).Uint(0).Array(0);
  ExpectCorruption(SafeDecode(Header(MsgType::kRegister), w.bytes()), "body: ");
}

// A version-7 register (no instance) is one field short: refused, not
// taken for a worker that gave no instance.
TEST_F(CodecTest, RegisterBodyWithoutItsInstanceIsRejected) {
  MsgpackWriter w;
  w.Array(11).Str("n").Str("").Uint(1).Array(1).Array(2).Uint(0).Uint(1).Uint(0);
  w.Array(1).Str("spin").Str("").Int(0).Array(0).Array(0).Uint(0);
  ExpectCorruption(SafeDecode(Header(MsgType::kRegister), w.bytes()), "body: ");
}

TEST_F(CodecTest, OutOfRangeCoreKindIsRejected) {
  auto kernels = [](MsgpackWriter& w) { w.Array(0); };
  for (auto write_kind : std::vector<std::function<void(MsgpackWriter&)>>{
           [](MsgpackWriter& w) { w.Uint(kNumCoreKinds); },
           [](MsgpackWriter& w) { w.Uint(255); },
           [](MsgpackWriter& w) { w.Int(-1); },
           [](MsgpackWriter& w) { w.Str("cube"); },
       }) {
    std::string body = RegisterBody(
        [&](MsgpackWriter& w) {
          w.Array(1).Array(2);
          write_kind(w);
          w.Uint(1);
        },
        kernels);
    ExpectCorruption(SafeDecode(Header(MsgType::kRegister), body), "core kind out of range");
  }
  // The same check guards TaskAssign.core.
  std::string assign = MsgpackWriter()
                           .Array(1)
                           .Array(1)
                           .Array(15)
                           .Uint(1)
                           .Uint(0)
                           .Uint(0)
                           .Str("noop")
                           .Uint(2)
                           .Uint(0)
                           .Array(0)
                           .Array(0)
                           .Uint(0)
                           .Array(3)
                           .Uint(0)
                           .Array(0)
                           .Uint(0)
                           .Str("")
                           .Str("")
                           .Str("")
                           .Bool(false)
                           .Str("")
                           .bytes();
  ExpectCorruption(SafeDecode(Header(MsgType::kAssignBatch), assign), "core kind out of range");
}

TEST_F(CodecTest, NonStringKernelNameIsRejected) {
  std::string body = RegisterBody([](MsgpackWriter& w) { w.Array(0); },
                                  [](MsgpackWriter& w) { w.Array(2).Str("spin").Uint(1); });
  ExpectCorruption(SafeDecode(Header(MsgType::kRegister), body), "expected a string");
}

// An AssignBatch of one task whose single argument value is written by `value`.
std::string AssignWithArgValue(const std::function<void(MsgpackWriter&)>& value) {
  MsgpackWriter w;
  w.Array(1).Array(1).Array(15).Uint(1).Uint(0).Uint(0).Str("k").Uint(0).Uint(0);
  w.Array(1).Array(2).Str("a");
  value(w);
  w.Array(0).Uint(0).Array(3).Uint(0).Array(0).Uint(0);  // inputs, reads, gang
  w.Str("");                                             // submodel
  w.Str("");                                             // task_id
  w.Str("");                                             // notify
  w.Bool(false);                                         // keeps_state
  w.Str("");                                             // state_from
  return w.bytes();
}

TEST_F(CodecTest, ArgValueOfNestedOrNilTypeIsRejected) {
  for (auto value : std::vector<std::function<void(MsgpackWriter&)>>{
           [](MsgpackWriter& w) { w.Array(1).Uint(1); },
           [](MsgpackWriter& w) { w.Map(0); },
           [](MsgpackWriter& w) { w.Nil(); },
       }) {
    ExpectCorruption(SafeDecode(Header(MsgType::kAssignBatch), AssignWithArgValue(value)),
                     "argument must be an integer, float, bool or string");
  }
  ExpectCorruption(
      SafeDecode(Header(MsgType::kAssignBatch),
                 AssignWithArgValue([](MsgpackWriter& w) { w.Uint(uint64_t{1} << 63); })),
      "integer out of range");
}

TEST_F(CodecTest, Float32ArgValueDecodesAsDouble) {
  Result<Message> r = SafeDecode(Header(MsgType::kAssignBatch),
                                 AssignWithArgValue([](MsgpackWriter& w) { w.F32(1.5f); }));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const ArgValue& v = std::get<AssignBatch>(*r).tasks.at(0).args.at(0).value;
  ASSERT_TRUE(std::holds_alternative<double>(v));
  EXPECT_EQ(std::get<double>(v), 1.5);
}

TEST_F(CodecTest, BodyOverMaxBodyBytesIsRejected) {
  // Shutdown{reason of 8 chars} is fixarray(1) + fixstr header + 8 bytes = 10.
  DecodeLimits limits;
  limits.max_body_bytes = 10;
  EncodedFrames at = Encode(Shutdown{.reason = "12345678"});
  ASSERT_EQ(at.body.size(), 10u);
  EXPECT_TRUE(SafeDecode(at.header, at.body, limits).ok());
  EncodedFrames over = Encode(Shutdown{.reason = "123456789"});
  ExpectCorruption(SafeDecode(over.header, over.body, limits), "body: too large");
}

TEST_F(CodecTest, StringOverMaxStringIsRejected) {
  DecodeLimits limits;
  limits.max_string = 4;
  EncodedFrames at = Encode(Shutdown{.reason = "abcd"});
  EXPECT_TRUE(SafeDecode(at.header, at.body, limits).ok());
  EncodedFrames over = Encode(Shutdown{.reason = "abcde"});
  ExpectCorruption(SafeDecode(over.header, over.body, limits), "body: ");
  RegisterMsg reg;
  reg.kernels = {"spin", "allreduce"};
  EncodedFrames nested = Encode(reg);
  ExpectCorruption(SafeDecode(nested.header, nested.body, limits), "body: ");
}

TEST_F(CodecTest, BatchOverMaxBatchIsRejected) {
  DecodeLimits limits;
  limits.max_batch = 2;
  TaskAssign t;
  t.kernel = "noop";
  EncodedFrames two = Encode(AssignBatch{.tasks = {t, t}});
  Result<Message> ok = SafeDecode(two.header, two.body, limits);
  ASSERT_TRUE(ok.ok()) << "a batch at the limit must decode: " << ok.status().ToString();
  EXPECT_EQ(std::get<AssignBatch>(*ok).tasks.size(), 2u);
  EncodedFrames three = Encode(AssignBatch{.tasks = {t, t, t}});
  ExpectCorruption(SafeDecode(three.header, three.body, limits), "body: ");

  DoneBatch done;
  done.results.resize(3);
  EncodedFrames results = Encode(done);
  ExpectCorruption(SafeDecode(results.header, results.body, limits), "body: ");
  done.results.resize(2);
  results = Encode(done);
  EXPECT_TRUE(SafeDecode(results.header, results.body, limits).ok());
}

TEST_F(CodecTest, BatchLimitSmallerThanFieldCountStillDecodesStructs) {
  // max_batch bounds batches, not the field arrays of a struct: a one-task
  // limit must still admit a TaskAssign (12 fields) and a RegisterMsg (14).
  DecodeLimits limits;
  limits.max_batch = 1;
  TaskAssign t;
  t.kernel = "noop";
  EncodedFrames one = Encode(AssignBatch{.tasks = {t}});
  Result<Message> r = SafeDecode(one.header, one.body, limits);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  EncodedFrames reg = Encode(RegisterMsg{.name = "w", .kernels = {"spin"}});
  Result<Message> rr = SafeDecode(reg.header, reg.body, limits);
  EXPECT_TRUE(rr.ok()) << rr.status().ToString();
}

TEST_F(CodecTest, ArgsOverMaxArgsAreRejected) {
  DecodeLimits limits;
  limits.max_args = 2;
  TaskAssign t;
  t.kernel = "spin";
  t.args = {{"a", int64_t{1}}, {"b", int64_t{2}}};
  EncodedFrames at = Encode(AssignBatch{.tasks = {t}});
  EXPECT_TRUE(SafeDecode(at.header, at.body, limits).ok());
  t.args.push_back({"c", int64_t{3}});
  EncodedFrames over = Encode(AssignBatch{.tasks = {t}});
  ExpectCorruption(SafeDecode(over.header, over.body, limits), "array too long");
}

TEST_F(CodecTest, DeepNestingIsRejectedWithoutCrashing) {
  std::string deep(100000, '\x91');
  deep.push_back('\x90');
  Result<Message> r = SafeDecode(Header(MsgType::kShutdown), deep);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
}

TEST_F(CodecTest, HugeClaimedArrayWithoutElementsIsRejected) {
  for (std::string body : {std::string("\xdd\xff\xff\xff\xff", 5), std::string("\xdc\xff\xff", 3),
                           std::string("\xdb\xff\xff\xff\xff", 5)}) {
    Result<Message> r = SafeDecode(Header(MsgType::kAssignBatch), body);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
  }
}

TEST_F(CodecTest, RandomBytesNeverCrash) {
  constexpr uint64_t kSeed = 0x5eed0001;
  constexpr int kIterations = 20000;
  LogSeed("random_bytes", kSeed);
  std::mt19937_64 rng(kSeed);
  int decoded = 0;
  for (int i = 0; i < kIterations; ++i) {
    // Mostly valid headers (so the body parser is exercised), some not.
    std::string header =
        rng() % 8 == 0 ? Header(static_cast<uint8_t>(rng() % 3), static_cast<uint8_t>(rng() % 12))
                       : Header(kProtocolVersion, static_cast<uint8_t>(1 + rng() % 9));
    std::string body(rng() % 48, '\0');
    for (char& c : body) c = static_cast<char>(rng());
    if (!body.empty() && rng() % 2) body[0] = static_cast<char>(0x90 | (rng() % 10));
    Result<Message> r = SafeDecode(header, body);
    if (r.ok()) {
      ++decoded;
      EXPECT_EQ(static_cast<uint8_t>(TypeOf(*r)), static_cast<uint8_t>(header[3]));
      ExpectStableReencoding(*r);
    } else {
      EXPECT_EQ(r.status().code(), StatusCode::kCorruption) << r.status().ToString();
      EXPECT_FALSE(r.status().message().empty());
    }
    if (HasFailure()) {
      ADD_FAILURE() << "iteration " << i << " seed " << kSeed;
      break;
    }
  }
  std::printf("[   INFO   ] %d of %d random frames decoded\n", decoded, kIterations);
}

TEST_F(CodecTest, MutatedValidFramesNeverCrash) {
  constexpr uint64_t kSeed = 0x5eed0002;
  constexpr int kMutationsPerMessage = 2000;
  LogSeed("mutations", kSeed);
  std::mt19937_64 rng(kSeed);
  const uint8_t kInteresting[] = {0x00, 0x7f, 0x80, 0x90, 0x9f, 0xc0, 0xc1, 0xc2, 0xc3,
                                  0xca, 0xcb, 0xcf, 0xd3, 0xd9, 0xdb, 0xdc, 0xdd, 0xff};
  int decoded = 0, total = 0;
  for (const Message& m : SampleMessages()) {
    EncodedFrames f = Encode(m);
    for (int i = 0; i < kMutationsPerMessage; ++i, ++total) {
      std::string body = f.body;
      int edits = 1 + static_cast<int>(rng() % 3);
      for (int e = 0; e < edits; ++e) {
        size_t pos = body.empty() ? 0 : rng() % body.size();
        switch (rng() % 5) {
          case 0:
            if (!body.empty()) body[pos] = static_cast<char>(body[pos] ^ (1 << (rng() % 8)));
            break;
          case 1:
            if (!body.empty())
              body[pos] = static_cast<char>(kInteresting[rng() % sizeof(kInteresting)]);
            break;
          case 2:
            body.insert(body.begin() + pos, static_cast<char>(rng()));
            break;
          case 3:
            if (!body.empty()) body.erase(body.begin() + pos);
            break;
          case 4:
            body.resize(pos);
            break;
        }
      }
      Result<Message> r = SafeDecode(f.header, body);
      if (r.ok()) {
        ++decoded;
        ExpectStableReencoding(*r);
      } else {
        EXPECT_EQ(r.status().code(), StatusCode::kCorruption) << r.status().ToString();
      }
      if (HasFailure()) {
        ADD_FAILURE() << MsgTypeName(TypeOf(m)) << " mutation " << i << " seed " << kSeed;
        return;
      }
    }
  }
  std::printf("[   INFO   ] %d of %d mutated frames decoded\n", decoded, total);
}

}  // namespace
}  // namespace hmpmd
