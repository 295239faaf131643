#include "services/fingerprint/gallery_set.h"

#include <stdlib.h>

#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/strings/match.h"
#include "common/durable_file.h"
#include "common/log.h"
#include "common/status.h"
#include "services/server/gallery_names.h"

namespace tessera {
namespace fingerprint {
namespace {
// A deleted gallery's directory while it is removed (not a gallery name: names have no dots).
constexpr char kDeletedPrefix[] = ".deleted-";
}  // namespace
namespace {

namespace fs = std::filesystem;

SearchBatcherOptions BatcherOptionsOf(const FingerprintServiceOptions& o) {
  SearchBatcherOptions b;
  b.max_batch_size = o.max_batch_size;
  b.max_queue_delay = o.max_queue_delay;
  b.max_queued = o.max_queued_searches;
  return b;
}

}  // namespace

absl::StatusOr<std::unique_ptr<HostedGallery>> GallerySet::OpenOne(const std::string& name,
                                                                   const std::string& dir) const {
  FingerprintServiceOptions o = options_;
  o.gallery_dir = dir;
  auto hosted = std::make_unique<HostedGallery>();
  hosted->name = name;
  absl::StatusOr<std::unique_ptr<FingerprintGallery>> opened = FingerprintGallery::Open(o);
  if (!opened.ok()) return Annotate(opened.status(), absl::StrCat("gallery '", name, "'"));
  hosted->gallery = std::move(*opened);
  FingerprintGallery* g = hosted->gallery.get();
  hosted->batcher = std::make_unique<SearchBatcher>(
      [g](const std::vector<std::vector<MinutiaPoint>>& probes, const SearchOptions& so, SearchStats* stats) {
        return g->Search(probes, so, stats);
      },
      g->matcher(), BatcherOptionsOf(options_), metrics_);
  return hosted;
}

absl::StatusOr<std::unique_ptr<GallerySet>> GallerySet::Open(const FingerprintServiceOptions& options,
                                                             SearchMetrics* metrics) {
  TESSERA_RETURN_IF_ERROR(BatcherOptionsOf(options).Validate());
  std::unique_ptr<GallerySet> set(new GallerySet(options, metrics));
  set->root_ = options.galleries_root;
  if (set->root_.empty() && options.gallery_dir.empty()) {
    char tmpl[] = "/tmp/tessera-galleries-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) return absl::InternalError("cannot create a temporary gallery root");
    set->root_ = tmpl;
    set->temporary_root_ = true;
    TESSERA_LOG(WARNING) << "fingerprint galleries in temporary " << set->root_
                         << ": enrollments will not survive a restart (set --gallery-dir or --galleries-root)";
  }
  std::error_code ec;
  if (!set->root_.empty()) {
    fs::create_directory(set->root_, ec);
    if (ec || !fs::is_directory(set->root_)) {
      return absl::FailedPreconditionError(
          absl::StrCat("gallery root ", set->root_, " is not a directory that can be created: ", ec.message()));
    }
  }
  std::string default_dir = options.gallery_dir;
  if (default_dir.empty()) {
    default_dir = set->root_ + "/" + kDefaultGallery;
  } else if (!set->root_.empty()) {
    const std::string under_root = set->root_ + "/" + kDefaultGallery;
    if (fs::exists(under_root) && !fs::equivalent(under_root, default_dir, ec)) {
      return absl::FailedPreconditionError(absl::StrCat("two default galleries: --gallery-dir ", default_dir,
                                                        " and ", under_root, " (move or rename one)"));
    }
  }
  // A damaged default gallery (DATA_LOSS) is that gallery's problem too: its
  // calls fail and the service reports NOT_SERVING (DefaultStatus), while the
  // other galleries and services serve. Any other error is a configuration
  // the operator must fix, so the start fails.
  absl::StatusOr<std::unique_ptr<HostedGallery>> hosted = set->OpenOne(kDefaultGallery, default_dir);
  if (hosted.ok()) {
    set->default_ = hosted->get();
    set->galleries_[kDefaultGallery] = *std::move(hosted);
  } else if (hosted.status().code() == absl::StatusCode::kDataLoss) {
    set->unavailable_[kDefaultGallery] = set->MarkUnavailable(kDefaultGallery, default_dir, hosted.status());
  } else {
    return hosted.status();
  }
  if (!set->root_.empty()) {
    for (const fs::directory_entry& entry : fs::directory_iterator(set->root_, ec)) {
      if (!entry.is_directory()) continue;
      const std::string name = entry.path().filename().string();
      if (name == kDefaultGallery) continue;
      if (absl::StartsWith(name, kDeletedPrefix)) {  // a DeleteGallery a crash interrupted: finish it
        fs::remove_all(entry.path(), ec);
        if (ec) return absl::InternalError(absl::StrCat("cannot finish deleting ", entry.path().string(), ": ",
                                                        ec.message()));
        TESSERA_LOG(WARNING) << "gallery root " << set->root_ << ": finished deleting " << name;
        continue;
      }
      if (absl::Status valid = CheckGalleryName(name); !valid.ok()) {
        TESSERA_LOG(WARNING) << "gallery root " << set->root_ << ": skipping a directory that is not a gallery name ("
                             << valid.message() << ")";
        continue;
      }
      // A named gallery that does not open (a damaged log or snapshot) is
      // that gallery's problem only: its calls get the error, the rest serve.
      absl::StatusOr<std::unique_ptr<HostedGallery>> g = set->OpenOne(name, entry.path().string());
      if (!g.ok()) {
        set->unavailable_[name] = set->MarkUnavailable(name, entry.path().string(), g.status());
        continue;
      }
      set->galleries_[name] = *std::move(g);
    }
    if (ec) return absl::InternalError(absl::StrCat("cannot list gallery root ", set->root_, ": ", ec.message()));
  }
  TESSERA_LOG(INFO) << "fingerprint service hosts " << set->galleries_.size() << " galler"
                    << (set->galleries_.size() == 1 ? "y" : "ies")
                    << (set->root_.empty() ? std::string() : absl::StrCat(" (root ", set->root_, ")"));
  return set;
}

absl::Status GallerySet::MarkUnavailable(const std::string& name, const std::string& dir,
                                         const absl::Status& why) const {
  TESSERA_LOG(ERROR) << "fingerprint gallery '" << name << "' is unavailable (its calls fail with this): " << why;
  return absl::Status(
      why.code() == absl::StatusCode::kDataLoss ? absl::StatusCode::kDataLoss : absl::StatusCode::kUnavailable,
      absl::StrCat("gallery '", name, "' could not be opened: ", why.message(), " (run `tessera fp check --gallery ",
                   dir, "`)"));
}

absl::Status GallerySet::DefaultStatus() const {
  if (default_ != nullptr) return absl::OkStatus();
  std::lock_guard<std::mutex> lock(mu_);
  return unavailable_.at(kDefaultGallery);
}

GallerySet::~GallerySet() {
  galleries_.clear();  // batchers and stores closed before their files go
  retired_.clear();
  if (temporary_root_) {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
}

absl::StatusOr<HostedGallery*> GallerySet::Get(absl::string_view name) const {
  const std::string n = GalleryOrDefault(name);
  TESSERA_RETURN_IF_ERROR(CheckGalleryName(n));
  std::lock_guard<std::mutex> lock(mu_);
  auto it = galleries_.find(n);
  if (it == galleries_.end()) {
    if (auto bad = unavailable_.find(n); bad != unavailable_.end()) return bad->second;
    return absl::NotFoundError(absl::StrCat("no gallery '", n, "' on this server"));
  }
  return it->second.get();
}

absl::StatusOr<HostedGallery*> GallerySet::Create(absl::string_view name) {
  TESSERA_RETURN_IF_ERROR(CheckGalleryName(name));
  std::lock_guard<std::mutex> create_lock(create_mu_);
  if (absl::StatusOr<HostedGallery*> existing = Get(name);
      existing.ok() || existing.status().code() != absl::StatusCode::kNotFound) {
    return absl::AlreadyExistsError(absl::StrCat("gallery '", name, "' exists",
                                                 existing.ok() ? "" : " (unavailable: delete it to start over)"));
  }
  if (root_.empty()) {
    return absl::FailedPreconditionError(
        "this server hosts only the default gallery (start it with --galleries-root to create named galleries)");
  }
  const std::string dir = absl::StrCat(root_, "/", name);
  TESSERA_ASSIGN_OR_RETURN(auto hosted, OpenOne(std::string(name), dir));
  // A new directory entry survives a crash only once its parent is synced
  // (best effort: the gallery itself is already durable and open).
  SyncDirectory(root_).IgnoreError();
  HostedGallery* out = hosted.get();
  std::lock_guard<std::mutex> lock(mu_);
  galleries_[std::string(name)] = std::move(hosted);
  TESSERA_LOG(INFO) << "created fingerprint gallery '" << name << "' in " << dir;
  return out;
}

absl::StatusOr<int64_t> GallerySet::Delete(absl::string_view name) {
  const std::string n = GalleryOrDefault(name);
  TESSERA_RETURN_IF_ERROR(CheckGalleryName(n));
  if (n == kDefaultGallery) {
    return absl::FailedPreconditionError("the default gallery cannot be deleted: delete its templates");
  }
  std::lock_guard<std::mutex> create_lock(create_mu_);
  std::unique_ptr<HostedGallery> gone;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = galleries_.find(n);
    if (it == galleries_.end()) {
      // An unavailable (damaged) gallery can be deleted too: that is how it is erased.
      if (unavailable_.erase(n) == 0) return absl::NotFoundError(absl::StrCat("no gallery '", n, "' on this server"));
    } else {
      gone = std::move(it->second);
      galleries_.erase(it);
    }
  }
  const int64_t templates = gone != nullptr ? gone->gallery->size() : 0;
  // Out of its name at once (one rename, made durable), then its files.
  const std::string dir = absl::StrCat(root_, "/", n);
  const std::string aside = absl::StrCat(root_, "/", kDeletedPrefix, n, "-", absl::ToUnixNanos(absl::Now()));
  std::error_code ec;
  fs::rename(dir, aside, ec);
  if (ec) {
    std::lock_guard<std::mutex> lock(mu_);
    if (gone != nullptr) galleries_[n] = std::move(gone);  // still there: still served
    return absl::InternalError(absl::StrCat("cannot delete gallery '", n, "': ", ec.message()));
  }
  TESSERA_RETURN_IF_ERROR(SyncDirectory(root_));
  fs::remove_all(aside, ec);
  if (ec) return absl::InternalError(absl::StrCat("gallery '", n, "' renamed to ", aside, " but not removed: ", ec.message()));
  TESSERA_RETURN_IF_ERROR(SyncDirectory(root_));
  if (gone != nullptr) {
    std::lock_guard<std::mutex> lock(mu_);
    retired_.push_back(std::move(gone));
  }
  TESSERA_LOG(INFO) << "deleted fingerprint gallery '" << n << "' (" << templates << " templates) from " << root_;
  return templates;
}

std::vector<std::pair<std::string, int64_t>> GallerySet::List() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::pair<std::string, int64_t>> out;
  for (const auto& [name, g] : galleries_) out.emplace_back(name, g->gallery->size());
  return out;
}

}  // namespace fingerprint
}  // namespace tessera
