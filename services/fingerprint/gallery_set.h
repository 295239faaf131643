// The named galleries one FingerprintService hosts (fingerprint.proto's
// `gallery` fields): each a FingerprintGallery (its own directory, store and
// index) with its own SearchBatcher, so a search only ever scores the
// templates of the gallery it names and batches only with searches of it.
//
//   --gallery-dir DIR        the gallery "default" (as before named galleries)
//   --galleries-root ROOT    ROOT/<name>/ for every other gallery; without
//                            --gallery-dir, "default" is ROOT/default
//   neither                  a temporary root, removed at exit
//
// At open every directory under ROOT whose name is a valid gallery name is
// opened (others are skipped with a warning). Galleries are created by
// CreateGallery and deleted by DeleteGallery (admin). A deleted gallery's
// directory is gone from disk at once (renamed aside, fsynced, removed; a
// crash in between leaves a ".deleted-*" directory that the next Open
// removes), while its in-memory object is retired, not destroyed, until the set
// is: searches already holding it finish on it, so the pointers Get() hands
// out stay valid until the set is destroyed.
#ifndef TESSERA_SERVICES_FINGERPRINT_GALLERY_SET_H_
#define TESSERA_SERVICES_FINGERPRINT_GALLERY_SET_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "services/fingerprint/fingerprint_service.h"
#include "services/fingerprint/search/search_batcher.h"
#include "services/fingerprint/search/search_metrics.h"

namespace tessera {
namespace fingerprint {

struct HostedGallery {
  std::string name;
  std::unique_ptr<FingerprintGallery> gallery;
  std::unique_ptr<SearchBatcher> batcher;  // after gallery: destroyed first
};

class GallerySet {
 public:
  // `metrics` (shared by every gallery's batcher) must outlive the set.
  static absl::StatusOr<std::unique_ptr<GallerySet>> Open(const FingerprintServiceOptions& options,
                                                          SearchMetrics* metrics);
  ~GallerySet();

  // INVALID_ARGUMENT for a bad name ("" is "default"), NOT_FOUND for an unknown one,
  // DATA_LOSS (or UNAVAILABLE) for a gallery that could not be opened at start.
  // The default gallery too: a damaged one (DATA_LOSS) leaves the set open
  // without it (DefaultStatus); any other error opening it fails Open.
  absl::StatusOr<HostedGallery*> Get(absl::string_view name) const;
  // The gallery "default"; null when it could not be opened (DefaultStatus says why).
  HostedGallery* Default() const { return default_; }
  absl::Status DefaultStatus() const;
  // ALREADY_EXISTS, INVALID_ARGUMENT, FAILED_PRECONDITION without a root.
  absl::StatusOr<HostedGallery*> Create(absl::string_view name);
  // Deletes gallery `name` (see above); returns how many templates it held.
  // FAILED_PRECONDITION for "default", NOT_FOUND for an unknown name.
  absl::StatusOr<int64_t> Delete(absl::string_view name);
  // (name, templates), by name.
  std::vector<std::pair<std::string, int64_t>> List() const;
  const std::string& root() const { return root_; }

 private:
  GallerySet(FingerprintServiceOptions options, SearchMetrics* metrics)
      : options_(std::move(options)), metrics_(metrics) {}
  absl::StatusOr<std::unique_ptr<HostedGallery>> OpenOne(const std::string& name, const std::string& dir) const;
  // Logs why gallery `name` (in `dir`) did not open; returns the error its calls get.
  absl::Status MarkUnavailable(const std::string& name, const std::string& dir, const absl::Status& why) const;

  const FingerprintServiceOptions options_;
  SearchMetrics* const metrics_;
  std::string root_;             // "" : no named galleries but "default"
  bool temporary_root_ = false;  // removed with the set
  std::mutex create_mu_;         // one CreateGallery at a time
  mutable std::mutex mu_;        // galleries_
  std::map<std::string, std::unique_ptr<HostedGallery>, std::less<>> galleries_;
  HostedGallery* default_ = nullptr;  // null: the default gallery is unavailable_
  std::vector<std::unique_ptr<HostedGallery>> retired_;  // deleted galleries (guarded by mu_)
  // Named galleries that did not open (guarded by mu_): Get answers their
  // error (DATA_LOSS naming the damaged file), the other galleries serve.
  std::map<std::string, absl::Status, std::less<>> unavailable_;
};

}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_GALLERY_SET_H_
