// The (tessera.v1.http) routes: every annotation of the service protos parses;
// templates match only their own paths (custom verbs included); path and query
// values bind into the request with errors naming the field.
#include "services/gateway/rest_routes.h"

#include <gtest/gtest.h>

#include "tessera/v1/fingerprint.pb.h"
#include "tessera/v1/scheduler.pb.h"

namespace tessera::gateway {
namespace {
namespace pb = google::protobuf;

std::vector<const pb::MethodDescriptor*> SchedulerAndFingerprint() {
  std::vector<const pb::MethodDescriptor*> methods;
  for (const pb::ServiceDescriptor* s :
       {v1::SubmitJobRequest::descriptor()->file()->FindServiceByName("SchedulerService"),
        v1::EnrollRequest::descriptor()->file()->FindServiceByName("FingerprintService")}) {
    for (int i = 0; i < s->method_count(); ++i) methods.push_back(s->method(i));
  }
  return methods;
}

TEST(RestRoutesTest, AnnotationsParseAndMatchTheirOwnPaths) {
  auto routes = RestRoutesOf(SchedulerAndFingerprint());
  ASSERT_TRUE(routes.ok()) << routes.status();
  EXPECT_GE(routes->size(), 14u);
  std::vector<std::pair<std::string, std::string>> vars;
  const RestRoute* get = MatchRestRoute(*routes, "GET", "/v1/jobs/j-1", &vars);
  ASSERT_NE(get, nullptr);
  EXPECT_EQ(get->method->name(), "Get");
  ASSERT_EQ(vars.size(), 1u);
  EXPECT_EQ(vars[0], std::make_pair(std::string("job_id"), std::string("j-1")));
  const RestRoute* cancel = MatchRestRoute(*routes, "POST", "/v1/jobs/j-1:cancel", &vars);
  ASSERT_NE(cancel, nullptr);
  EXPECT_EQ(cancel->method->name(), "Cancel");
  EXPECT_EQ(vars[0].second, "j-1");
  EXPECT_EQ(MatchRestRoute(*routes, "GET", "/v1/jobs/j-1:cancel", &vars), nullptr);  // a verb is not an id
  EXPECT_EQ(MatchRestRoute(*routes, "POST", "/v1/jobs/:cancel", &vars), nullptr);    // empty id
  EXPECT_EQ(MatchRestRoute(*routes, "GET", "/v1/jobs/a/b", &vars), nullptr);
  EXPECT_EQ(MatchRestRoute(*routes, "PUT", "/v1/jobs", &vars), nullptr);
  const RestRoute* search = MatchRestRoute(*routes, "POST", "/v1/galleries/g1:search", &vars);
  ASSERT_NE(search, nullptr);
  EXPECT_EQ(search->method->name(), "Search");
  EXPECT_EQ(search->body, "*");
}

TEST(RestRoutesTest, BindsFieldsFromTextNamingBadOnes) {
  v1::ListJobsRequest list;
  EXPECT_TRUE(SetFieldFromText(&list, "page_size", "7").ok());
  EXPECT_TRUE(SetFieldFromText(&list, "pageToken", "t").ok());  // JSON names too
  EXPECT_TRUE(SetFieldFromText(&list, "states", "JOB_STATE_RUNNING").ok());
  EXPECT_TRUE(SetFieldFromText(&list, "states", "3").ok());  // enum by number
  EXPECT_EQ(list.page_size(), 7);
  EXPECT_EQ(list.page_token(), "t");
  ASSERT_EQ(list.states_size(), 2);
  EXPECT_EQ(list.states(1), v1::JOB_STATE_SUCCEEDED);
  const grpc::Status bad_int = SetFieldFromText(&list, "page_size", "seven");
  EXPECT_EQ(bad_int.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(bad_int.error_message().find("page_size"), std::string::npos);
  EXPECT_EQ(SetFieldFromText(&list, "states", "JOB_STATE_NAPPING").error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  const grpc::Status unknown = SetFieldFromText(&list, "colour", "red");
  EXPECT_NE(unknown.error_message().find("no field 'colour'"), std::string::npos) << unknown.error_message();
  v1::SubmitJobRequest submit;
  EXPECT_TRUE(SetFieldFromText(&submit, "spec.kind", "registration").ok());  // nested
  EXPECT_EQ(submit.spec().kind(), "registration");
  EXPECT_EQ(SetFieldFromText(&submit, "spec", "x").error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

}  // namespace
}  // namespace tessera::gateway
