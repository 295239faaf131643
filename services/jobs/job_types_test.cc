#include "services/jobs/job_types.h"

#include <string>

#include "gtest/gtest.h"

namespace tessera::jobs {
namespace {

TEST(JobTypesTest, JobIdsAreShortAndOfASafeCharset) {
  EXPECT_TRUE(ValidateJobId("mine-1").ok());
  EXPECT_TRUE(ValidateJobId(std::string(128, 'a')).ok());
  EXPECT_EQ(ValidateJobId("bad id").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateJobId(std::string(129, 'a')).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateJobId("").code(), absl::StatusCode::kInvalidArgument);
}

TEST(JobTypesTest, StatesAndNames) {
  EXPECT_FALSE(IsTerminal(JobState::kQueued));
  EXPECT_FALSE(IsTerminal(JobState::kRunning));
  EXPECT_TRUE(IsTerminal(JobState::kSucceeded));
  EXPECT_TRUE(IsTerminal(JobState::kFailed));
  EXPECT_TRUE(IsTerminal(JobState::kCancelled));
  EXPECT_EQ(JobStateName(JobState::kRunning), "RUNNING");
  EXPECT_EQ(JobStateName(JobState::kCancelled), "CANCELLED");
}

}  // namespace
}  // namespace tessera::jobs
