// Deadlines and cancellation inside the work: a SearchBatch (DMC, many
// probes) whose client gave up returns DEADLINE_EXCEEDED / CANCELLED, and the
// server stops computing it soon after: the process's CPU time stays flat
// once the call is over (before, such calls ran to the end: four of them
// cost 27 CPU-seconds after their clients had gone).
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "kernels/fingerprint/test_templates.h"
#include "services/fingerprint/service_testing.h"

namespace tessera {
namespace fingerprint {
namespace {

using testing::ProcessCpuSeconds;
using testing::TestServer;
using testing::XytTemplate;

class DeadlineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FingerprintServiceOptions options;
    options.max_batch_size = 1;  // calls straight to the searcher
    auto server = TestServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    ASSERT_TRUE(testing::EnrollAll(server_->service(), fingerprint::testing::SyntheticTemplates(600, 3)).ok());
    for (const auto& p : fingerprint::testing::SyntheticTemplates(256, 4)) *request_.add_probes() = XytTemplate(p);
    request_.set_matcher("dmc");
    request_.set_top_k(5);
  }

  // CPU seconds the process burns in `seconds` of wall time.
  static double CpuOver(double seconds) {
    const double c0 = ProcessCpuSeconds();
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    return ProcessCpuSeconds() - c0;
  }

  std::unique_ptr<TestServer> server_;
  v1::SearchBatchRequest request_;
};

TEST_F(DeadlineTest, AbandonedSearchBatchStopsTheServerWork) {
  // What the whole call would cost: 4 of its 256 probes, run to the end.
  v1::SearchBatchRequest sample = request_;
  sample.mutable_probes()->DeleteSubrange(4, 252);
  double c0 = ProcessCpuSeconds();
  {
    grpc::ClientContext ctx;
    v1::SearchBatchResponse resp;
    ASSERT_TRUE(server_->stub().SearchBatch(&ctx, sample, &resp).ok());
  }
  const double full_cost = (ProcessCpuSeconds() - c0) * 256 / 4;

  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(150));
  v1::SearchBatchResponse resp;
  const grpc::Status s = server_->stub().SearchBatch(&ctx, request_, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << s.error_message();
  // Let the server notice (polls every few ms), then watch it idle.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const double after = CpuOver(1.0);
  std::printf("full call: ~%.1f CPU-s; CPU after the deadline (+0.3 s .. +1.3 s): %.3f s\n", full_cost, after);
  EXPECT_GT(full_cost, 2.0);  // the work is worth stopping
  EXPECT_LT(after, 0.2);
}

TEST_F(DeadlineTest, ClientCancelStopsTheServerWork) {
  grpc::ClientContext ctx;
  v1::SearchBatchResponse resp;
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    ctx.TryCancel();
  });
  const grpc::Status s = server_->stub().SearchBatch(&ctx, request_, &resp);
  canceller.join();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::CANCELLED) << s.error_message();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_LT(CpuOver(1.0), 0.2);
}

TEST_F(DeadlineTest, SingleSearchHonoursItsDeadline) {
  v1::SearchRequest one;
  *one.mutable_probe() = request_.probes(0);
  one.set_matcher("dmc");
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(1));
  v1::SearchResponse resp;
  const grpc::Status s = server_->stub().Search(&ctx, one, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << s.error_message();
}

}  // namespace
}  // namespace fingerprint
}  // namespace tessera
