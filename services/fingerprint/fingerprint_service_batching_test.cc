// FingerprintService.Search with dynamic batching, over gRPC: concurrent
// calls run in shared batches yet get exactly the candidates of unbatched
// searches (mixed top_k and matchers); a full queue answers
// RESOURCE_EXHAUSTED with a retry hint (message and grpc-retry-pushback-ms)
// and every call gets an answer; the metrics show batch sizes, queue and
// compute times.
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/metrics.h"
#include "kernels/fingerprint/test_templates.h"
#include "services/fingerprint/service_testing.h"

namespace tessera {
namespace fingerprint {
namespace {

using testing::TestServer;

std::unique_ptr<TestServer> StartWithGallery(FingerprintServiceOptions options, int templates) {
  auto server = TestServer::Start(std::move(options));
  EXPECT_TRUE(server.ok()) << server.status();
  EXPECT_TRUE(testing::EnrollAll((*server)->service(), testing::SyntheticTemplates(templates, 91)).ok());
  return std::move(*server);
}

TEST(FingerprintServiceBatchingTest, ConcurrentSearchesAreBatchedAndEqualUnbatched) {
  auto registry = std::make_shared<prometheus::Registry>();
  FingerprintServiceOptions options;
  options.max_batch_size = 16;
  options.max_queue_delay = absl::Milliseconds(30);
  options.metrics_registry = registry;
  auto server = StartWithGallery(options, 300);
  const auto probes = testing::SyntheticTemplates(40, 92);
  const int n = 48;
  std::vector<v1::SearchResponse> responses(n);
  std::vector<grpc::Status> statuses(n);
  std::vector<std::thread> threads;
  auto top_k = [](int i) { return 1 + (i * 5) % 17; };
  auto matcher = [](int i) { return i % 12 == 11 ? std::string("dmc") : std::string(i % 2 ? "" : "lssr"); };
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      v1::SearchRequest req;
      *req.mutable_probe() = testing::XytTemplate(probes[i % 40]);
      req.set_top_k(top_k(i));
      req.set_matcher(matcher(i));
      grpc::ClientContext ctx;
      statuses[i] = server->stub().Search(&ctx, req, &responses[i]);
    });
  }
  for (auto& t : threads) t.join();
  int batched = 0;
  for (int i = 0; i < n; ++i) {
    ASSERT_TRUE(statuses[i].ok()) << i << ": " << statuses[i].error_message();
    // Unbatched reference: the same parsed probe straight to the gallery.
    auto parsed = ParseProbeOrTemplate(testing::XytRecord(probes[i % 40]), TemplateFormat::kXyt);
    ASSERT_TRUE(parsed.ok());
    auto alone = server->service().gallery().Search({parsed->minutiae}, top_k(i), nullptr, matcher(i));
    ASSERT_TRUE(alone.ok());
    const auto& want = (*alone)[0];
    ASSERT_EQ(responses[i].candidates_size(), static_cast<int>(want.size())) << i;
    for (size_t r = 0; r < want.size(); ++r) {
      EXPECT_EQ(responses[i].candidates(r).id(), want[r].id) << i << " rank " << r;
      EXPECT_EQ(responses[i].candidates(r).score(), want[r].score) << i << " rank " << r;
    }
    const v1::SearchTiming& t = responses[i].timing();
    EXPECT_EQ(t.matcher(), matcher(i) == "dmc" ? "dmc" : "lssr");
    EXPECT_GE(t.queue_ms(), 0);
    EXPECT_GE(t.batch_size(), 1);
    batched += t.batch_size() > 1;
  }
  EXPECT_GT(batched, n / 2);
  const std::string text = SerializeMetrics(*registry);
  EXPECT_NE(text.find("tessera_fingerprint_search_batch_size_bucket{matcher=\"lssr\""), std::string::npos) << text;
  EXPECT_NE(text.find("tessera_fingerprint_search_queue_seconds_count{matcher=\"dmc\"}"), std::string::npos);
  EXPECT_NE(text.find("tessera_fingerprint_search_compute_seconds_count{matcher=\"lssr\"}"), std::string::npos);
  EXPECT_NE(text.find("tessera_fingerprint_search_queue_depth 0"), std::string::npos);
  EXPECT_NE(text.find(absl::StrCat("tessera_fingerprint_searches_total{outcome=\"ok\"} ", n)), std::string::npos);
}

TEST(FingerprintServiceBatchingTest, FullQueueRejectsWithRetryPushback) {
  FingerprintServiceOptions options;
  options.max_batch_size = 2;
  options.max_queue_delay = absl::ZeroDuration();
  options.max_queued_searches = 2;
  options.metrics_registry = std::make_shared<prometheus::Registry>();
  auto server = StartWithGallery(options, 400);
  const auto probes = testing::SyntheticTemplates(16, 93);
  const int n = 16;
  std::vector<grpc::Status> statuses(n);
  std::vector<std::string> pushback(n);
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      v1::SearchRequest req;
      *req.mutable_probe() = testing::XytTemplate(probes[i]);
      req.set_matcher("dmc");  // slow enough for the queue to fill
      grpc::ClientContext ctx;
      v1::SearchResponse resp;
      statuses[i] = server->stub().Search(&ctx, req, &resp);
      const auto& trailers = ctx.GetServerTrailingMetadata();
      auto it = trailers.find("grpc-retry-pushback-ms");
      if (it != trailers.end()) pushback[i] = std::string(it->second.data(), it->second.size());
    });
  }
  for (auto& t : threads) t.join();
  int ok = 0, rejected = 0;
  for (int i = 0; i < n; ++i) {
    if (statuses[i].ok()) {
      ++ok;
      continue;
    }
    ASSERT_EQ(statuses[i].error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << statuses[i].error_message();
    EXPECT_NE(statuses[i].error_message().find("retry after about"), std::string::npos);
    EXPECT_FALSE(pushback[i].empty()) << "no grpc-retry-pushback-ms trailer";
    if (!pushback[i].empty()) EXPECT_GT(std::stoll(pushback[i]), 0);
    ++rejected;
  }
  EXPECT_GT(rejected, 0);
  EXPECT_GE(ok, 3);  // the running batch and the queued ones
  EXPECT_LE(server->service().search_batcher().counters().max_queue_depth, 2);
}

TEST(FingerprintServiceBatchingTest, BadBatchingOptionsAreRejected) {
  ServerOptions server;
  server.device = "cpu";
  FingerprintServiceOptions o;
  o.max_batch_size = 0;
  EXPECT_EQ(FingerprintServiceImpl::Create(server, o).status().code(), absl::StatusCode::kInvalidArgument);
  o.max_batch_size = 8;
  o.max_queued_searches = 0;
  EXPECT_EQ(FingerprintServiceImpl::Create(server, o).status().code(), absl::StatusCode::kInvalidArgument);
  o.max_queued_searches = 8;
  o.max_queue_delay = absl::Milliseconds(-1);
  EXPECT_EQ(FingerprintServiceImpl::Create(server, o).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace fingerprint
}  // namespace tessera
