// An Engine over one spec message type, whose spec is unpacked and checked
// once per job: Validate and Needs (at submit) and Run (when a worker of
// this process takes the job) share one plan made from the spec.
//
//   class RegistrationEngine final : public jobs::TypedEngine<v1::RegisterRequest, RegisterJobPlan> {
//     absl::StatusOr<RegisterJobPlan> MakePlan(const v1::RegisterRequest& request) const override;
//     absl::Status CheckPlan(const RegisterJobPlan& plan) const override;       // files under the roots
//     jobs::ResourceNeeds NeedsOf(const RegisterJobPlan& plan) const override;
//     absl::StatusOr<jobs::EngineOutput> RunPlan(const RegisterJobPlan& plan, jobs::EngineContext& ctx) const override;
//   };
//
// Plans are kept in a small cache of this engine's (the most recent
// kPlanCacheSize specs, by their bytes), so a plan is made once per job in a
// process that both takes and runs it; a worker in another process makes it
// once there. MakePlan must depend on the spec alone (no files, no clock):
// checks of the server's files belong in CheckPlan (at submit); RunPlan
// checks again what it opens, since files may change between submit and run.
#ifndef TESSERA_SERVICES_JOBS_TYPED_ENGINE_H_
#define TESSERA_SERVICES_JOBS_TYPED_ENGINE_H_

#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "services/jobs/engine.h"

namespace tessera::jobs {

template <typename SpecT, typename PlanT>
class TypedEngine : public Engine {
 public:
  static constexpr size_t kPlanCacheSize = 64;

  std::string spec_type() const final { return SpecT::descriptor()->full_name(); }

  absl::Status Validate(const google::protobuf::Any& spec) const final {
    absl::StatusOr<std::shared_ptr<const PlanT>> plan = PlanOf(spec);
    if (!plan.ok()) return plan.status();
    return CheckPlan(**plan);
  }

  ResourceNeeds Needs(const google::protobuf::Any& spec) const final {
    absl::StatusOr<std::shared_ptr<const PlanT>> plan = PlanOf(spec);
    return plan.ok() ? NeedsOf(**plan) : ResourceNeeds{};
  }

  std::vector<std::string> ReferencedJobs(const google::protobuf::Any& spec) const final {
    absl::StatusOr<std::shared_ptr<const PlanT>> plan = PlanOf(spec);
    return plan.ok() ? ReferencedJobsOf(**plan) : std::vector<std::string>{};
  }

  absl::StatusOr<EngineOutput> Run(const google::protobuf::Any& spec, EngineContext& ctx) const final {
    absl::StatusOr<std::shared_ptr<const PlanT>> plan = PlanOf(spec);
    if (!plan.ok()) return plan.status();
    return RunPlan(**plan, ctx);
  }

  // How many plans this engine has made (MakePlan calls that succeeded or
  // failed): tests count them.
  int64_t plans_made() const { return plans_made_.load(); }

 protected:
  // The spec checked and resolved into what the run needs, from the spec
  // alone. INVALID_ARGUMENT (or the like) naming the field when it is wrong.
  virtual absl::StatusOr<PlanT> MakePlan(const SpecT& spec) const = 0;
  // Submit-time checks that need this server (paths under the data roots,
  // file sizes). Not called by Run: RunPlan resolves what it opens itself.
  virtual absl::Status CheckPlan(const PlanT& /*plan*/) const { return absl::OkStatus(); }
  virtual ResourceNeeds NeedsOf(const PlanT& /*plan*/) const { return {}; }
  virtual std::vector<std::string> ReferencedJobsOf(const PlanT& /*plan*/) const { return {}; }
  virtual absl::StatusOr<EngineOutput> RunPlan(const PlanT& plan, EngineContext& ctx) const = 0;

 private:
  // The cached plan of `spec`, or a new one (cached when it was made).
  absl::StatusOr<std::shared_ptr<const PlanT>> PlanOf(const google::protobuf::Any& spec) const {
    const std::string key = spec.type_url() + '\n' + spec.value();
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto it = cache_.begin(); it != cache_.end(); ++it) {
        if (it->first != key) continue;
        cache_.splice(cache_.begin(), cache_, it);  // most recent first
        return cache_.front().second;
      }
    }
    SpecT typed;
    if (absl::Status unpacked = UnpackSpec(spec, &typed); !unpacked.ok()) return unpacked;
    ++plans_made_;
    absl::StatusOr<PlanT> made = MakePlan(typed);
    if (!made.ok()) return made.status();
    auto plan = std::make_shared<const PlanT>(*std::move(made));
    std::lock_guard<std::mutex> lock(mu_);
    cache_.emplace_front(key, plan);
    if (cache_.size() > kPlanCacheSize) cache_.pop_back();
    return plan;
  }

  mutable std::mutex mu_;
  mutable std::list<std::pair<std::string, std::shared_ptr<const PlanT>>> cache_;  // guarded by mu_
  mutable std::atomic<int64_t> plans_made_{0};
};

}  // namespace tessera::jobs

#endif  // TESSERA_SERVICES_JOBS_TYPED_ENGINE_H_
