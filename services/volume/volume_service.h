// tessera.v1.VolumeService: reads or receives a volume and summarizes it
// (shape, geometry, orientation, statistics computed on the GPU when there is one).
//
//   absl::StatusOr<std::unique_ptr<tessera::VolumeServiceImpl>> volume =
//       tessera::VolumeServiceImpl::Create(options);  // options: ServerOptions
//   host.AddService(volume->get());
#ifndef TESSERA_SERVICES_VOLUME_VOLUME_SERVICE_H_
#define TESSERA_SERVICES_VOLUME_VOLUME_SERVICE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/server_context.h>
#include <grpcpp/support/sync_stream.h>

#include "absl/status/statusor.h"
#include "common/array_stats.h"
#include "common/device.h"
#include "common/volume.h"
#include "services/common/chunked_upload.h"
#include "services/common/data_roots.h"
#include "services/server/server_options.h"
#include "tessera/v1/volume.grpc.pb.h"

namespace tessera {

class VolumeServiceImpl final : public v1::VolumeService::Service {
 public:
  // Uses options.data_roots (each must be an existing directory, else
  // INVALID_ARGUMENT/NOT_FOUND), options.max_volume_bytes and options.device
  // ("cuda" without a GPU is FAILED_PRECONDITION).
  static absl::StatusOr<std::unique_ptr<VolumeServiceImpl>> Create(const ServerOptions& options);

  // Errors: INVALID_ARGUMENT (empty path, not a regular file, not NIfTI),
  // PERMISSION_DENIED (outside the data roots), NOT_FOUND (no such file under
  // a root), FAILED_PRECONDITION (no data roots configured), RESOURCE_EXHAUSTED
  // (larger than max_volume_bytes), DATA_LOSS (truncated/corrupt file).
  grpc::Status DescribeFile(grpc::ServerContext* context, const v1::DescribeFileRequest* request,
                            v1::VolumeSummary* response) override;

  // The first chunk carries the header; chunks must then cover the array's
  // bytes contiguously and in order. Errors: INVALID_ARGUMENT (bad or missing
  // header, out-of-order or overrunning chunk, header repeated), RESOURCE_EXHAUSTED
  // (array larger than max_volume_bytes), DATA_LOSS (stream ended short),
  // CANCELLED / DEADLINE_EXCEEDED.
  grpc::Status DescribeStream(grpc::ServerContext* context, grpc::ServerReader<v1::ArrayChunk>* reader,
                              v1::VolumeSummary* response) override;

  // The canonical (realpath) data roots in use.
  const std::vector<std::string>& data_roots() const { return roots_; }

 private:
  VolumeServiceImpl(std::vector<std::string> roots, int64_t max_volume_bytes, Backend backend)
      : roots_(std::move(roots)), max_volume_bytes_(max_volume_bytes), backend_(backend) {}

  absl::Status DescribeFileImpl(const grpc::ServerContext& context, const std::string& path,
                                v1::VolumeSummary* response) const;
  absl::Status DescribeStreamImpl(const grpc::ServerContext& context, grpc::ServerReader<v1::ArrayChunk>* reader,
                                  v1::VolumeSummary* response) const;
  absl::StatusOr<ArrayStats> Stats(const NDArray& array) const;

  const std::vector<std::string> roots_;
  const int64_t max_volume_bytes_;
  const Backend backend_;
};

// Exposed for tests; the implementations now live in services/common
// (data_roots.h, chunked_upload.h), shared with the other services.
namespace volume_internal {

// See tessera::ResolveUnderRoots (services/common/data_roots.h).
inline absl::StatusOr<std::string> ResolveUnderRoots(const std::string& requested,
                                                     const std::vector<std::string>& real_roots) {
  return ::tessera::ResolveUnderRoots(requested, real_roots);
}

using StreamHeader = ArrayHeader;

// See tessera::ValidateArrayHeader (services/common/chunked_upload.h).
inline absl::StatusOr<StreamHeader> ValidateStreamHeader(const v1::VolumeHeader& header, int64_t max_bytes) {
  return ValidateArrayHeader(header, max_bytes);
}

}  // namespace volume_internal
}  // namespace tessera

#endif  // TESSERA_SERVICES_VOLUME_VOLUME_SERVICE_H_
