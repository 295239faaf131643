// The example module's engine: the "example.sum" job kind, a TypedEngine over
// the service's own request message. Plain C++ (no gRPC): the scheduler's
// workers, the service and a CLI verb would all run this one class.
#ifndef TESSERA_TESTS_EXAMPLE_MODULE_SUM_ENGINE_H_
#define TESSERA_TESTS_EXAMPLE_MODULE_SUM_ENGINE_H_

#include <string>
#include <vector>

#include "services/jobs/typed_engine.h"
#include "tessera/testing/example.pb.h"

namespace tessera::example {

// The request checked once per job (MakePlan), then read by NeedsOf and RunPlan.
struct SumPlan {
  std::vector<double> values;
};

class SumEngine final : public jobs::TypedEngine<testing::SumRequest, SumPlan> {
 public:
  static constexpr int64_t kMaxValues = 1000000;

  std::string kind() const override { return "example.sum"; }

 protected:
  absl::StatusOr<SumPlan> MakePlan(const testing::SumRequest& request) const override;
  absl::StatusOr<jobs::EngineOutput> RunPlan(const SumPlan& plan, jobs::EngineContext& ctx) const override;
};

}  // namespace tessera::example

#endif  // TESSERA_TESTS_EXAMPLE_MODULE_SUM_ENGINE_H_
