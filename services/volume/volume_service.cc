#include "services/volume/volume_service.h"

#include <sys/stat.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/log.h"
#include "common/dicom/volume_file.h"
#include "common/nifti_io.h"
#include "common/status.h"
#include "services/server/call_checks.h"

namespace tessera {

namespace {

void FillGeometry(const Geometry& g, v1::VolumeSummary* summary, bool fill_header) {
  if (fill_header) {
    v1::VolumeHeader* header = summary->mutable_header();
    for (double v : g.spacing) header->add_spacing(v);
    for (double v : g.origin) header->add_origin(v);
    for (double v : g.direction) header->add_direction(v);
  }
  summary->set_orientation(g.AxisCodes());
  for (double v : g.IndexToWorld()) summary->add_affine(v);
}

void FillStats(const ArrayStats& stats, Backend backend, v1::VolumeSummary* summary) {
  summary->set_voxel_count(stats.count);
  summary->set_nonfinite_count(stats.nonfinite_count);
  summary->set_min(stats.min);
  summary->set_max(stats.max);
  summary->set_mean(stats.mean);
  summary->set_stddev(stats.stddev);
  summary->set_backend(std::string(BackendName(backend)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<VolumeServiceImpl>> VolumeServiceImpl::Create(const ServerOptions& options) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<std::string> roots, CanonicalDataRoots(options.data_roots));
  if (options.max_volume_bytes <= 0) return absl::InvalidArgumentError("max_volume_bytes must be positive");
  TESSERA_ASSIGN_OR_RETURN(Backend backend, ResolveBackend(options.device));
  return std::unique_ptr<VolumeServiceImpl>(new VolumeServiceImpl(std::move(roots), options.max_volume_bytes, backend));
}

absl::StatusOr<ArrayStats> VolumeServiceImpl::Stats(const NDArray& array) const {
  TESSERA_ASSIGN_OR_RETURN(Stream stream, Stream::Create(backend_, 0));
  return ComputeArrayStats(array, stream);
}

grpc::Status VolumeServiceImpl::DescribeFile(grpc::ServerContext* context, const v1::DescribeFileRequest* request,
                                             v1::VolumeSummary* response) {
  return ToGrpcStatus(DescribeFileImpl(*context, request->path(), response));
}

absl::Status VolumeServiceImpl::DescribeFileImpl(const grpc::ServerContext& context, const std::string& requested,
                                                 v1::VolumeSummary* response) const {
  TESSERA_ASSIGN_OR_RETURN(const std::string path, ResolveUnderRoots(requested, roots_));
  // Refuse files that cannot fit before decompressing them (gzip never
  // shrinks incompressible data by more than a fraction of a percent).
  struct stat st;
  if (stat(path.c_str(), &st) == 0 && st.st_size > max_volume_bytes_ + max_volume_bytes_ / 64 + (1 << 20)) {
    return absl::ResourceExhaustedError(absl::StrCat("'", requested, "' (", st.st_size,
                                                     " bytes) exceeds the server's volume limit of ",
                                                     max_volume_bytes_, " bytes"));
  }
  std::string format;  // NIfTI, or a DICOM series in one file or a zip
  TESSERA_ASSIGN_OR_RETURN(Volume volume, ReadVolumeFile(path, &format,
                                                        max_volume_bytes_ > (int64_t{1} << 60) ? max_volume_bytes_ : max_volume_bytes_ + max_volume_bytes_ / 8 + (int64_t{64} << 20)));
  if (static_cast<int64_t>(volume.data.nbytes()) > max_volume_bytes_) {
    return absl::ResourceExhaustedError(absl::StrCat("'", requested, "' holds ", volume.data.nbytes(),
                                                     " bytes, more than the server's limit of ", max_volume_bytes_));
  }
  TESSERA_RETURN_IF_ERROR(CheckNotCancelled(context));
  TESSERA_ASSIGN_OR_RETURN(ArrayStats stats, Stats(volume.data));

  v1::VolumeHeader* header = response->mutable_header();
  for (int64_t d : volume.data.shape()) header->add_dims(d);
  header->set_dtype(static_cast<v1::DType>(static_cast<int>(volume.data.dtype())));
  header->set_description(volume.description);
  FillGeometry(volume.geometry, response, /*fill_header=*/true);
  FillStats(stats, backend_, response);
  response->set_format(format);
  return absl::OkStatus();
}

grpc::Status VolumeServiceImpl::DescribeStream(grpc::ServerContext* context,
                                               grpc::ServerReader<v1::ArrayChunk>* reader,
                                               v1::VolumeSummary* response) {
  return ToGrpcStatus(DescribeStreamImpl(*context, reader, response));
}

absl::Status VolumeServiceImpl::DescribeStreamImpl(const grpc::ServerContext& context,
                                                   grpc::ServerReader<v1::ArrayChunk>* reader,
                                                   v1::VolumeSummary* response) const {
  TESSERA_ASSIGN_OR_RETURN(ReceivedArray received, ReceiveChunkedArray(context, reader, max_volume_bytes_));
  *response->mutable_header() = received.header_proto;
  const ArrayHeader& plan = received.header;
  const NDArray& array = received.data;
  TESSERA_ASSIGN_OR_RETURN(ArrayStats stats, Stats(array));
  const int rank = static_cast<int>(plan.shape.size());
  if (plan.has_geometry || rank == 3 || rank == 4) {
    FillGeometry(plan.geometry, response, /*fill_header=*/false);
  }
  FillStats(stats, backend_, response);
  response->set_format("stream");
  return absl::OkStatus();
}

}  // namespace tessera
