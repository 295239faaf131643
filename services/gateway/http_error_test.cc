// The gRPC -> HTTP status mapping and the JSON error body.
#include "services/gateway/http_error.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace tessera::gateway {
namespace {

TEST(HttpErrorTest, StandardMapping) {
  EXPECT_EQ(HttpStatusOf(grpc::StatusCode::OK), 200);
  EXPECT_EQ(HttpStatusOf(grpc::StatusCode::INVALID_ARGUMENT), 400);
  EXPECT_EQ(HttpStatusOf(grpc::StatusCode::FAILED_PRECONDITION), 400);
  EXPECT_EQ(HttpStatusOf(grpc::StatusCode::UNAUTHENTICATED), 401);
  EXPECT_EQ(HttpStatusOf(grpc::StatusCode::PERMISSION_DENIED), 403);
  EXPECT_EQ(HttpStatusOf(grpc::StatusCode::NOT_FOUND), 404);
  EXPECT_EQ(HttpStatusOf(grpc::StatusCode::ALREADY_EXISTS), 409);
  EXPECT_EQ(HttpStatusOf(grpc::StatusCode::ABORTED), 409);
  EXPECT_EQ(HttpStatusOf(grpc::StatusCode::RESOURCE_EXHAUSTED), 429);
  EXPECT_EQ(HttpStatusOf(grpc::StatusCode::UNIMPLEMENTED), 501);
  EXPECT_EQ(HttpStatusOf(grpc::StatusCode::UNAVAILABLE), 503);
  EXPECT_EQ(HttpStatusOf(grpc::StatusCode::DEADLINE_EXCEEDED), 504);
  EXPECT_EQ(HttpStatusOf(grpc::StatusCode::INTERNAL), 500);
  EXPECT_EQ(HttpStatusOf(grpc::StatusCode::DATA_LOSS), 500);
}

TEST(HttpErrorTest, JsonBodyWithRetryHint) {
  const auto body = nlohmann::json::parse(
      ErrorJson(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "queue full \"now\""), 1500));
  EXPECT_EQ(body["code"], 8);
  EXPECT_EQ(body["status"], "RESOURCE_EXHAUSTED");
  EXPECT_EQ(body["message"], "queue full \"now\"");
  EXPECT_EQ(body["retryAfterMs"], 1500);
  EXPECT_FALSE(nlohmann::json::parse(ErrorJson(grpc::Status(grpc::StatusCode::NOT_FOUND, "x"))).contains("retryAfterMs"));
  EXPECT_EQ(RetryAfterSeconds(1500), 2);
  EXPECT_EQ(RetryAfterSeconds(2000), 2);
  EXPECT_EQ(RetryAfterSeconds(0), 1);
  // Invalid UTF-8 in a message does not break the body.
  EXPECT_NO_THROW(nlohmann::json::parse(ErrorJson(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "bad \xff byte"))));
}

}  // namespace
}  // namespace tessera::gateway
