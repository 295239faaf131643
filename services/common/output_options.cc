#include "services/common/output_options.h"

#include <sys/stat.h>

#include <fstream>

#include "common/dicom/dicom_series.h"
#include "common/status.h"
#include "services/common/data_roots.h"
#include "services/common/random_id.h"

namespace tessera {
namespace {

// A series directory or one DICOM file: what the writers can copy identity
// from (a zip is read as a series but not copied from).
bool IsCopyableDicomSeries(const std::string& path) {
  if (path.empty() || !dicom::IsDicomPath(path)) return false;
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return false;
  if (S_ISDIR(st.st_mode)) return true;
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  in.read(magic, 4);
  return !(magic[0] == 'P' && magic[1] == 'K' && magic[2] == 3 && magic[3] == 4);
}

}  // namespace

absl::StatusOr<dicom::ResultOutputPlan> ResolveOutputOptions(const v1::OutputOptions& options,
                                                             const std::vector<std::string>& real_roots,
                                                             const std::string& default_reference,
                                                             int64_t max_reference_bytes) {
  dicom::ResultOutputRequest request;
  request.format = options.format();
  request.deidentify = options.deidentify();
  request.series_description = options.series_description();
  const bool dicom = options.format() == "dicom" || options.format() == "both";
  if (!options.reference_series().empty() && dicom) {
    absl::StatusOr<std::string> path = ResolveFileOrDirUnderRoots(options.reference_series(), real_roots);
    if (!path.ok()) return Annotate(path.status(), "output.reference_series");
    request.reference_series = *std::move(path);
  } else {
    request.reference_series = options.reference_series();  // refused below without DICOM
  }
  TESSERA_ASSIGN_OR_RETURN(dicom::ResultOutputPlan plan,
                           dicom::PlanResultOutputs(request, RandomId("salt-"), "output.", max_reference_bytes));
  if (!plan.dicom) return plan;
  if (plan.reference_series.empty() && IsCopyableDicomSeries(default_reference)) {
    plan.reference_series = default_reference;
  }
  // The result lies on the input it defaults to: the same patient space.
  plan.same_frame_of_reference = !default_reference.empty() && plan.reference_series == default_reference;
  return plan;
}

}  // namespace tessera
