#include "services/jobs/engine.h"

#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tessera::jobs {

absl::Status EngineContext::CheckContinue() const {
  if (cancel_ != nullptr && cancel_->load()) return absl::CancelledError(absl::StrCat("job ", job_id_, " cancelled"));
  if (deadline_ != absl::InfiniteFuture() && absl::Now() > deadline_) {
    return absl::DeadlineExceededError(absl::StrCat("job ", job_id_, " passed its deadline"));
  }
  return absl::OkStatus();
}

absl::Status EngineRegistry::Add(std::shared_ptr<const Engine> engine) {
  const std::string kind = engine->kind();
  if (!by_kind_.emplace(kind, std::move(engine)).second) {
    return absl::AlreadyExistsError(absl::StrCat("an engine of kind '", kind, "' is already registered"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const Engine>> EngineRegistry::FindKind(const std::string& kind) const {
  auto it = by_kind_.find(kind);
  if (it == by_kind_.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("no engine of kind '", kind, "'; this server runs: ", absl::StrJoin(kinds(), ", ")));
  }
  return it->second;
}

absl::StatusOr<std::shared_ptr<const Engine>> EngineRegistry::Find(const std::string& kind,
                                                                   const google::protobuf::Any& spec) const {
  if (!kind.empty()) return FindKind(kind);
  const std::string type = SpecTypeName(spec.type_url());
  for (const auto& [name, engine] : by_kind_) {
    if (type == engine->spec_type()) return engine;
  }
  return absl::InvalidArgumentError(absl::StrCat("the job spec's type '", spec.type_url(),
                                                 "' matches no engine; this server runs: ",
                                                 absl::StrJoin(kinds(), ", ")));
}

std::vector<std::string> EngineRegistry::kinds() const {
  std::vector<std::string> out;
  for (const auto& [kind, engine] : by_kind_) out.push_back(kind);
  return out;
}

std::vector<std::string> EngineRegistry::spec_types() const {
  std::vector<std::string> out;
  for (const auto& [kind, engine] : by_kind_) out.push_back(engine->spec_type());
  return out;
}

std::string SpecTypeName(const std::string& type_url) { return type_url.substr(type_url.rfind('/') + 1); }

absl::Status UnpackSpec(const google::protobuf::Any& spec, google::protobuf::Message* message) {
  if (!spec.UnpackTo(message)) {
    return absl::InvalidArgumentError(absl::StrCat("the job spec holds '", spec.type_url(), "'; expected ",
                                                   message->GetDescriptor()->full_name()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<EngineFile>> DescribeWorkFiles(const std::string& work_dir,
                                                          const std::vector<std::string>& names) {
  std::vector<EngineFile> files;
  for (const std::string& name : names) {
    std::error_code ec;
    const uintmax_t bytes = std::filesystem::file_size(std::filesystem::path(work_dir) / name, ec);
    if (ec) return absl::InternalError(absl::StrCat("result file ", name, " vanished: ", ec.message()));
    files.push_back(EngineFile{name, static_cast<int64_t>(bytes)});
  }
  return files;
}

}  // namespace tessera::jobs
