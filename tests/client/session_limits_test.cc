// The driver against an in-process controller without workers: what it
// sends stays within the controller's decode limits (a message over one was
// dropped unanswered, its tasks lost and the session still "succeeded"),
// and Close() ends every Future.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "hmpmd/client/client.h"
#include "hmpmd/protocol/codec.h"
#include "in_process_controller.h"

namespace hmpmd {
namespace {

using client::Call;
using client::Client;
using client::ClientOptions;
using client::Future;

class SessionLimitsTest : public InProcessControllerTest {};

constexpr DecodeLimits kLimits{};

TEST_F(SessionLimitsTest, ACallOverADecodeLimitIsRefusedAtSubmit) {
  auto c = Connect(Options());
  ASSERT_NE(c, nullptr);
  const std::string big(kLimits.max_string + 1, 'x');
  EXPECT_EQ(
      c->Submit({.kernel = "u.count", .args = {{"s", big}}, .label = "big"}).status().message(),
      "call 0 'big': args['s']: 1048577 bytes, over the 1 MiB a string may hold");
  EXPECT_EQ(c->Submit({.kernel = big}).status().message(),
            "call 0: kernel: 1048577 bytes, over the 1 MiB a string may hold");
  Args many;
  for (size_t i = 0; i <= kLimits.max_args; ++i) many.push_back({"a" + std::to_string(i), 1.0});
  EXPECT_EQ(c->Submit({.kernel = "u.count", .args = many}).status().message(),
            "call 0: args: 257 arguments, over the 256 a task may have");
  std::vector<Call> graph(kLimits.max_batch + 1, Call{.kernel = "noop"});
  EXPECT_EQ(c->SubmitGraph(graph).status().message(),
            "submit: 65537 calls, over the 65536 one submit may hold; split the graph");
  // Every string within its limit, the group over the bytes of a message.
  std::vector<Call> heavy(
      70, Call{.kernel = "u.count", .args = {{"s", std::string(kLimits.max_string, 'x')}}});
  auto refused = c->SubmitGraph(heavy);
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("submit: 70 calls of about 70 MiB, over the 64 MiB "
                                            "one submit may hold"),
            std::string::npos)
      << refused.status().message();
  // None of those became a task: the next call is acknowledged (Cancel
  // waits for the ack) and ends.
  Future after = c->Submit({.kernel = "u.count", .label = "after"}).value();
  EXPECT_TRUE(c->Cancel(after).ok());
  EXPECT_EQ(after.Wait(20000).code(), StatusCode::kCancelled);

  // A name over the limit: the open was dropped, and Connect failed after
  // its timeout as "no controller answered".
  ClientOptions named = Options();
  named.session = big;
  EXPECT_EQ(Client::Connect(named).status().message(),
            "session: 1048577 bytes, over the 1 MiB a string may hold");
}

TEST_F(SessionLimitsTest, CallsQueuedPastTheBytesOfAMessageAreAllAcknowledged) {
  ClientOptions o = Options();
  o.connect_timeout_ms = 5000;  // how long Cancel waits for an ack
  auto c = Connect(o);
  ASSERT_NE(c, nullptr);
  // 96 calls of 1 MiB each, queued faster than the I/O thread sends them:
  // it packed them into messages of more than 64 MiB, which the controller
  // dropped.
  std::vector<Call> calls;
  for (int i = 0; i < 96; ++i) {
    calls.push_back({.kernel = "u.count", .args = {{"s", std::string(kLimits.max_string, 'x')}}});
  }
  std::vector<Future> fs;
  for (Call& call : calls) fs.push_back(c->Submit(std::move(call)).value());
  for (size_t i = 0; i < fs.size(); ++i) {
    ASSERT_TRUE(c->Cancel(fs[i]).ok()) << "call " << i << " was never acknowledged";
  }
  for (Future& f : fs) EXPECT_EQ(f.Wait(20000).code(), StatusCode::kCancelled);
}

TEST_F(SessionLimitsTest, AGraphUnderTheBytesOfAMessageIsTakenWhole) {
  ClientOptions o = Options();
  o.connect_timeout_ms = 20000;  // how long Cancel waits for an ack
  auto c = Connect(o);
  ASSERT_NE(c, nullptr);
  // About 63.6 MiB encoded: 63 MiB of strings, and 400 tasks of 256 small
  // arguments each (6 bytes apiece). Counted by hand at msgpack's largest
  // heads (22 bytes an argument) the graph was about 65.2 MiB, and refused.
  std::vector<Call> graph(
      63, Call{.kernel = "u.count", .args = {{"s", std::string(kLimits.max_string, 'x')}}});
  Args small;
  for (size_t i = 0; i < kLimits.max_args; ++i) small.push_back({"a" + std::to_string(i), 1});
  for (int i = 0; i < 400; ++i) graph.push_back({.kernel = "u.count", .args = small});
  auto fs = c->SubmitGraph(std::move(graph));
  ASSERT_TRUE(fs.ok()) << fs.status().ToString();
  // The controller decoded it: the last call is acknowledged.
  ASSERT_TRUE(c->Cancel(fs->back()).ok());
  EXPECT_EQ(fs->back().Wait(20000).code(), StatusCode::kCancelled);
}

}  // namespace
}  // namespace hmpmd
