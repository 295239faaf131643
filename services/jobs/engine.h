// A job engine: one kind of long work (a registration, a SOM training, a
// fingerprint search batch, a reconstruction), as plain C++ that every front
// end shares: the scheduler's workers, the services' own job RPCs and the CLI.
// An engine takes its spec as the protobuf request message of its service
// (packed in google.protobuf.Any), reports progress and polls for
// cancellation through EngineContext, writes its result files into
// EngineContext::work_dir and returns a typed result message. No gRPC types.
//
//   class RegistrationEngine : public Engine {
//     std::string kind() const override { return "registration"; }
//     std::string spec_type() const override { return "tessera.v1.RegisterRequest"; }
//     absl::Status Validate(const google::protobuf::Any& spec) const override;
//     absl::StatusOr<EngineOutput> Run(const google::protobuf::Any& spec, EngineContext& ctx) const override;
//   };
#ifndef TESSERA_SERVICES_JOBS_ENGINE_H_
#define TESSERA_SERVICES_JOBS_ENGINE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <google/protobuf/any.pb.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "services/jobs/job_types.h"

namespace tessera::jobs {

// What the engine sees of its job while it runs.
class EngineContext {
 public:
  EngineContext(std::string job_id, std::string work_dir, const std::atomic<bool>* cancel, absl::Time deadline,
                std::function<void(const JobProgress&)> report)
      : job_id_(std::move(job_id)),
        work_dir_(std::move(work_dir)),
        cancel_(cancel),
        deadline_(deadline),
        report_(std::move(report)) {}

  const std::string& job_id() const { return job_id_; }
  // An empty directory of this attempt's own; published atomically as the
  // job's result directory when the engine succeeds, removed otherwise.
  const std::string& work_dir() const { return work_dir_; }
  // For engine loops that take a flag (RunRegistration's `cancel`).
  const std::atomic<bool>* cancel_flag() const { return cancel_; }
  absl::Time deadline() const { return deadline_; }
  // CANCELLED once cancellation was requested, DEADLINE_EXCEEDED past the
  // deadline, else OK: engines call it between iterations.
  absl::Status CheckContinue() const;
  void Report(const JobProgress& progress) const {
    if (report_) report_(progress);
  }
  // The device-memory peak of this job's own allocations, when the engine
  // measures it (reported with the outcome).
  void SetPeakDeviceBytes(int64_t bytes) { peak_device_bytes_ = bytes; }
  int64_t peak_device_bytes() const { return peak_device_bytes_; }

 private:
  const std::string job_id_;
  const std::string work_dir_;
  const std::atomic<bool>* cancel_;
  const absl::Time deadline_;
  const std::function<void(const JobProgress&)> report_;
  int64_t peak_device_bytes_ = 0;
};

struct EngineFile {
  std::string name;   // relative to the result directory
  int64_t bytes = 0;
};

struct EngineOutput {
  google::protobuf::Any result;     // the engine's typed result message
  std::vector<EngineFile> files;    // written under work_dir
};

// What a job needs of a worker, for placement.
struct ResourceNeeds {
  bool needs_gpu = false;           // true: only workers with a CUDA device
  int64_t device_bytes = 0;         // estimate; 0 when unknown or small
};

class Engine {
 public:
  virtual ~Engine() = default;
  // "registration", "som.train", "fingerprint.search", ...
  virtual std::string kind() const = 0;
  // Full protobuf name of the spec message, e.g. "tessera.v1.RegisterRequest".
  virtual std::string spec_type() const = 0;
  // Cheap checks at submit time (shape of the request, paths under the data
  // roots), so a bad job fails its Submit rather than later. INVALID_ARGUMENT,
  // NOT_FOUND, ... with a message a user can act on.
  virtual absl::Status Validate(const google::protobuf::Any& spec) const = 0;
  virtual ResourceNeeds Needs(const google::protobuf::Any& /*spec*/) const { return {}; }
  // Other jobs whose results this job reads (apply-transforms of a
  // registration job's transforms): a scheduler takes the job only from a
  // caller who may see each of them (services/jobs/job_access.h), so naming
  // a job id cannot reach another owner's results.
  virtual std::vector<std::string> ReferencedJobs(const google::protobuf::Any& /*spec*/) const { return {}; }
  // Runs the job to the end. Returns CANCELLED / DEADLINE_EXCEEDED when
  // ctx.CheckContinue() said so.
  virtual absl::StatusOr<EngineOutput> Run(const google::protobuf::Any& spec, EngineContext& ctx) const = 0;
};

// The engines a process can run, by kind. Not thread-safe to Add while others
// look up: fill it at start-up.
class EngineRegistry {
 public:
  // ALREADY_EXISTS when an engine of that kind is there.
  absl::Status Add(std::shared_ptr<const Engine> engine);
  // The engine for `kind`, or (kind empty) the one whose spec type the Any
  // holds. INVALID_ARGUMENT naming the known kinds otherwise.
  absl::StatusOr<std::shared_ptr<const Engine>> Find(const std::string& kind, const google::protobuf::Any& spec) const;
  absl::StatusOr<std::shared_ptr<const Engine>> FindKind(const std::string& kind) const;
  std::vector<std::string> kinds() const;
  // spec_type() of each of kinds(), in the same order.
  std::vector<std::string> spec_types() const;

 private:
  std::map<std::string, std::shared_ptr<const Engine>> by_kind_;
};

// `names` (files an engine wrote under `work_dir`) with their sizes, for
// EngineOutput::files; INTERNAL when one is not there.
absl::StatusOr<std::vector<EngineFile>> DescribeWorkFiles(const std::string& work_dir,
                                                          const std::vector<std::string>& names);

// The full message name a packed spec holds ("tessera.v1.RegisterRequest"
// of type.googleapis.com/tessera.v1.RegisterRequest): what spec_type() names.
std::string SpecTypeName(const std::string& type_url);

// Unpacks `spec` into `message`, or INVALID_ARGUMENT naming the expected type.
absl::Status UnpackSpec(const google::protobuf::Any& spec, google::protobuf::Message* message);

}  // namespace tessera::jobs

#endif  // TESSERA_SERVICES_JOBS_ENGINE_H_
