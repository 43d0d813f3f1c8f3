// Tests for Status, Result<T> and the RETURN_IF_ERROR / ASSIGN_OR_RETURN
// macros (protocol/status.{h,cc}).
#include "hmpmd/protocol/status.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace hmpmd {
namespace {

// Every code, with the name StatusCodeName must give it.
const std::vector<std::pair<StatusCode, std::string>>& AllCodes() {
  static const std::vector<std::pair<StatusCode, std::string>> kCodes = {
      {StatusCode::kOk, "OK"},
      {StatusCode::kInvalidArgument, "InvalidArgument"},
      {StatusCode::kNotFound, "NotFound"},
      {StatusCode::kAlreadyExists, "AlreadyExists"},
      {StatusCode::kUnavailable, "Unavailable"},
      {StatusCode::kCorruption, "Corruption"},
      {StatusCode::kPermissionDenied, "PermissionDenied"},
      {StatusCode::kResourceExhausted, "ResourceExhausted"},
      {StatusCode::kInternal, "Internal"},
      {StatusCode::kCancelled, "Cancelled"},
      {StatusCode::kDeadlineExceeded, "DeadlineExceeded"},
      {StatusCode::kAborted, "Aborted"},
  };
  return kCodes;
}

class StatusTest : public ::testing::Test {
 protected:
  // Helpers that exercise the macros the way production code does.
  static Status FailIf(bool fail) {
    if (fail) return Status::NotFound("thing 'x'");
    return Status::Ok();
  }
  static Status Twice(bool fail_first, bool fail_second, int* reached) {
    RETURN_IF_ERROR(FailIf(fail_first));
    ++*reached;
    RETURN_IF_ERROR(FailIf(fail_second));
    ++*reached;
    return Status::Ok();
  }
  static Result<int> Half(int v) {
    if (v % 2 != 0) return Status::InvalidArgument("odd: " + std::to_string(v));
    return v / 2;
  }
  static Result<int> Quarter(int v) {
    ASSIGN_OR_RETURN(int h, Half(v));
    ASSIGN_OR_RETURN(int q, Half(h));
    return q;
  }
};

TEST_F(StatusTest, DefaultIsOkWithEmptyMessage) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_EQ(s.message(), "");
  EXPECT_EQ(s.ToString(), "OK");
  EXPECT_TRUE(Status::Ok().ok());
}

TEST_F(StatusTest, FactoriesSetCodeAndMessage) {
  const std::vector<std::pair<Status, StatusCode>> cases = {
      {Status::InvalidArgument("m"), StatusCode::kInvalidArgument},
      {Status::NotFound("m"), StatusCode::kNotFound},
      {Status::AlreadyExists("m"), StatusCode::kAlreadyExists},
      {Status::Unavailable("m"), StatusCode::kUnavailable},
      {Status::Corruption("m"), StatusCode::kCorruption},
      {Status::PermissionDenied("m"), StatusCode::kPermissionDenied},
      {Status::ResourceExhausted("m"), StatusCode::kResourceExhausted},
      {Status::Internal("m"), StatusCode::kInternal},
      {Status::Cancelled("m"), StatusCode::kCancelled},
      {Status::DeadlineExceeded("m"), StatusCode::kDeadlineExceeded},
      {Status::Aborted("m"), StatusCode::kAborted},
  };
  for (const auto& [status, code] : cases) {
    EXPECT_FALSE(status.ok()) << StatusCodeName(code);
    EXPECT_EQ(status.code(), code);
    EXPECT_EQ(status.message(), "m");
  }
}

TEST_F(StatusTest, CodeNamesAreDistinctAndStable) {
  for (const auto& [code, name] : AllCodes()) {
    EXPECT_EQ(StatusCodeName(code), name);
  }
  EXPECT_EQ(StatusCodeName(static_cast<StatusCode>(200)), "Unknown");
}

TEST_F(StatusTest, ToStringPrefixesTheCodeName) {
  Status s = Status::InvalidArgument("tasks[3].inputs: unknown task 'x'");
  EXPECT_EQ(s.ToString(), "InvalidArgument: tasks[3].inputs: unknown task 'x'");
  EXPECT_EQ(Status::Corruption("body: too large").ToString(), "Corruption: body: too large");
}

TEST_F(StatusTest, ResultHoldsValueWhenBuiltFromValue) {
  Result<std::string> r(std::string("hello"));
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r.status().ok());
  EXPECT_EQ(*r, "hello");
  EXPECT_EQ(r->size(), 5u);
  r.value() += "!";
  EXPECT_EQ(r.value(), "hello!");
}

TEST_F(StatusTest, ResultHoldsStatusWhenBuiltFromError) {
  Result<int> r(Status::NotFound("job 7"));
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(r.status().message(), "job 7");
}

TEST_F(StatusTest, ResultMovesOutMoveOnlyValues) {
  Result<std::unique_ptr<int>> r(std::make_unique<int>(42));
  ASSERT_TRUE(r.ok());
  std::unique_ptr<int> p = std::move(r).value();
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(*p, 42);
}

TEST_F(StatusTest, ReturnIfErrorStopsAtFirstFailure) {
  int reached = 0;
  EXPECT_TRUE(Twice(false, false, &reached).ok());
  EXPECT_EQ(reached, 2);

  reached = 0;
  Status s = Twice(true, false, &reached);
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "thing 'x'");
  EXPECT_EQ(reached, 0);

  reached = 0;
  EXPECT_EQ(Twice(false, true, &reached).code(), StatusCode::kNotFound);
  EXPECT_EQ(reached, 1);
}

TEST_F(StatusTest, AssignOrReturnPropagatesTheInnerError) {
  Result<int> ok = Quarter(12);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, 3);

  Result<int> first = Quarter(7);  // fails in the first Half
  ASSERT_FALSE(first.ok());
  EXPECT_EQ(first.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(first.status().message(), "odd: 7");

  Result<int> second = Quarter(6);  // 6 -> 3, fails in the second Half
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().message(), "odd: 3");
}

}  // namespace
}  // namespace hmpmd
