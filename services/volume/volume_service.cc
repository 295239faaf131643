#include "services/volume/volume_service.h"

#include <sys/stat.h>

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/grpc_status.h"
#include "common/log.h"
#include "common/nifti_io.h"
#include "common/status.h"
#include "services/server/call_checks.h"

namespace tessera {
namespace volume_internal {
namespace {

bool IsUnder(const std::string& path, const std::string& root) {
  if (root == "/") return !path.empty() && path[0] == '/';
  return path == root || (path.size() > root.size() && path.compare(0, root.size(), root) == 0 &&
                          path[root.size()] == '/');
}

bool IsUnderAny(const std::string& path, const std::vector<std::string>& roots) {
  for (const std::string& root : roots) {
    if (IsUnder(path, root)) return true;
  }
  return false;
}

absl::StatusOr<std::string> RealPath(const std::string& path) {
  char buf[PATH_MAX];
  if (realpath(path.c_str(), buf) == nullptr) {
    const int err = errno;
    const std::string message = absl::StrCat("'", path, "': ", std::strerror(err));
    if (err == ENOENT || err == ENOTDIR) return absl::NotFoundError(message);
    if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(message);
    return absl::InvalidArgumentError(message);
  }
  return std::string(buf);
}

std::string Lexical(const std::string& path) {
  std::string out = std::filesystem::path(path).lexically_normal().string();
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

std::string RootsList(const std::vector<std::string>& roots) { return absl::StrJoin(roots, ", "); }

}  // namespace

absl::StatusOr<std::string> ResolveUnderRoots(const std::string& requested,
                                              const std::vector<std::string>& real_roots) {
  if (requested.empty()) return absl::InvalidArgumentError("path is empty");
  if (requested.find('\0') != std::string::npos) return absl::InvalidArgumentError("path contains a NUL byte");
  if (real_roots.empty()) {
    return absl::FailedPreconditionError(
        "this server reads no files: it was started without a data root (tessera serve --data-root=DIR)");
  }
  std::vector<std::string> candidates;
  if (requested[0] == '/') {
    candidates.push_back(requested);
  } else {
    for (const std::string& root : real_roots) candidates.push_back(absl::StrCat(root, "/", requested));
  }
  const std::string denied = absl::StrCat("'", requested, "' is outside the server's data roots (",
                                          RootsList(real_roots), ")");
  bool missing_inside_root = false;
  for (const std::string& candidate : candidates) {
    absl::StatusOr<std::string> real = RealPath(candidate);
    if (real.ok()) {
      // Symlinks are resolved, so a link inside a root pointing out is denied.
      if (!IsUnderAny(*real, real_roots)) return absl::PermissionDeniedError(denied);
      struct stat st;
      if (stat(real->c_str(), &st) != 0) {
        return absl::NotFoundError(absl::StrCat("'", requested, "': ", std::strerror(errno)));
      }
      if (!S_ISREG(st.st_mode)) {
        return absl::InvalidArgumentError(absl::StrCat("'", requested, "' is not a regular file"));
      }
      return *std::move(real);
    }
    if (real.status().code() != absl::StatusCode::kNotFound) {
      // Say nothing about paths outside the roots.
      if (!IsUnderAny(Lexical(candidate), real_roots)) return absl::PermissionDeniedError(denied);
      return real.status();
    }
    if (IsUnderAny(Lexical(candidate), real_roots)) missing_inside_root = true;
  }
  if (!missing_inside_root) return absl::PermissionDeniedError(denied);
  return absl::NotFoundError(absl::StrCat("no such file: '", requested, "' (data roots: ", RootsList(real_roots), ")"));
}

absl::StatusOr<StreamHeader> ValidateStreamHeader(const v1::VolumeHeader& header, int64_t max_bytes) {
  StreamHeader out;
  if (header.dims_size() < 1 || header.dims_size() > 7) {
    return absl::InvalidArgumentError(
        absl::StrCat("header has ", header.dims_size(), " dims; expected 1 to 7"));
  }
  const int dtype_value = static_cast<int>(header.dtype());
  if (dtype_value < static_cast<int>(DType::kUInt8) || dtype_value > static_cast<int>(DType::kFloat64)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "header dtype ", v1::DType_Name(header.dtype()).empty() ? std::to_string(dtype_value)
                                                                  : v1::DType_Name(header.dtype()),
        " is not an array element type (uint8, int8, uint16, int16, int32, float32 or float64)"));
  }
  out.dtype = static_cast<DType>(dtype_value);
  for (int i = 0; i < header.dims_size(); ++i) {
    if (header.dims(i) <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("header dim ", i, " is ", header.dims(i), "; dims must be positive"));
    }
    out.shape.push_back(header.dims(i));
  }
  // Bytes, checked against the limit without overflowing.
  int64_t bytes = static_cast<int64_t>(SizeOf(out.dtype));
  for (int64_t d : out.shape) {
    if (bytes > max_bytes / d) {
      return absl::ResourceExhaustedError(absl::StrCat("array ", ShapeToString(out.shape), " of ",
                                                       DTypeName(out.dtype), " exceeds the server's limit of ",
                                                       max_bytes, " bytes"));
    }
    bytes *= d;
  }
  if (bytes > max_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat("array ", ShapeToString(out.shape), " of ", DTypeName(out.dtype),
                                                     " (", bytes, " bytes) exceeds the server's limit of ", max_bytes,
                                                     " bytes"));
  }
  out.nbytes = bytes;

  out.has_geometry = header.spacing_size() > 0 || header.origin_size() > 0 || header.direction_size() > 0;
  if (header.spacing_size() > 3) {
    return absl::InvalidArgumentError(absl::StrCat("header has ", header.spacing_size(), " spacings; at most 3"));
  }
  for (int i = 0; i < header.spacing_size(); ++i) {
    const double s = header.spacing(i);
    if (!std::isfinite(s) || s <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("header spacing ", i, " is ", s, "; must be finite and positive"));
    }
    out.geometry.spacing[i] = s;
  }
  if (header.origin_size() > 3) {
    return absl::InvalidArgumentError(absl::StrCat("header has ", header.origin_size(), " origin entries; at most 3"));
  }
  for (int i = 0; i < header.origin_size(); ++i) {
    if (!std::isfinite(header.origin(i))) {
      return absl::InvalidArgumentError(absl::StrCat("header origin ", i, " is not finite"));
    }
    out.geometry.origin[i] = header.origin(i);
  }
  if (header.direction_size() != 0) {
    if (header.direction_size() != 9) {
      return absl::InvalidArgumentError(absl::StrCat("header direction has ", header.direction_size(),
                                                     " entries; expected 9 (row-major 3x3) or none"));
    }
    for (int i = 0; i < 9; ++i) {
      if (!std::isfinite(header.direction(i))) {
        return absl::InvalidArgumentError(absl::StrCat("header direction entry ", i, " is not finite"));
      }
      out.geometry.direction[i] = header.direction(i);
    }
    const auto& d = out.geometry.direction;
    for (int c = 0; c < 3; ++c) {
      const double norm = std::sqrt(d[c] * d[c] + d[3 + c] * d[3 + c] + d[6 + c] * d[6 + c]);
      if (std::abs(norm - 1) > 1e-3) {
        return absl::InvalidArgumentError(absl::StrCat("header direction column ", c, " has length ", norm,
                                                       "; columns must be unit vectors (scale goes in spacing)"));
      }
    }
    const double det = d[0] * (d[4] * d[8] - d[5] * d[7]) - d[1] * (d[3] * d[8] - d[5] * d[6]) +
                       d[2] * (d[3] * d[7] - d[4] * d[6]);
    if (std::abs(det) < 1e-6) {
      return absl::InvalidArgumentError("header direction matrix is singular (its axes are not independent)");
    }
  }
  return out;
}

}  // namespace volume_internal

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
  std::vector<std::string> roots;
  for (const std::string& root : options.data_roots) {
    char buf[PATH_MAX];
    if (realpath(root.c_str(), buf) == nullptr) {
      const int err = errno;
      const std::string message = absl::StrCat("data root '", root, "': ", std::strerror(err));
      return err == ENOENT ? absl::NotFoundError(message) : absl::InvalidArgumentError(message);
    }
    struct stat st;
    if (stat(buf, &st) != 0 || !S_ISDIR(st.st_mode)) {
      return absl::InvalidArgumentError(absl::StrCat("data root '", root, "' is not a directory"));
    }
    roots.emplace_back(buf);
  }
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
  TESSERA_ASSIGN_OR_RETURN(const std::string path, volume_internal::ResolveUnderRoots(requested, roots_));
  // Refuse files that cannot fit before decompressing them (gzip never
  // shrinks incompressible data by more than a fraction of a percent).
  struct stat st;
  if (stat(path.c_str(), &st) == 0 && st.st_size > max_volume_bytes_ + max_volume_bytes_ / 64 + (1 << 20)) {
    return absl::ResourceExhaustedError(absl::StrCat("'", requested, "' (", st.st_size,
                                                     " bytes) exceeds the server's volume limit of ",
                                                     max_volume_bytes_, " bytes"));
  }
  NiftiInfo info;
  TESSERA_ASSIGN_OR_RETURN(Volume volume, ReadNifti(path, &info));
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
  response->set_format(info.version == 2 ? "NIfTI-2" : "NIfTI-1");
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
  static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "ArrayChunk data is little-endian");
  v1::ArrayChunk chunk;
  if (!reader->Read(&chunk)) {
    return StatusAfterFailedIo(context, absl::InvalidArgumentError(
                                            "empty stream: the first ArrayChunk must carry the header"));
  }
  if (!chunk.has_header()) {
    return absl::InvalidArgumentError("the first ArrayChunk must carry the header");
  }
  TESSERA_ASSIGN_OR_RETURN(volume_internal::StreamHeader plan,
                           volume_internal::ValidateStreamHeader(chunk.header(), max_volume_bytes_));
  *response->mutable_header() = chunk.header();
  TESSERA_ASSIGN_OR_RETURN(NDArray array, NDArray::Allocate(plan.shape, plan.dtype, MemoryKind::kHost));
  char* const dst = static_cast<char*>(array.raw_data());
  const int64_t total = plan.nbytes;
  int64_t received = 0;
  int64_t index = 0;
  for (;;) {
    if (index > 0 && chunk.has_header()) {
      return absl::InvalidArgumentError(absl::StrCat("chunk ", index, " carries a header; only the first may"));
    }
    const int64_t size = static_cast<int64_t>(chunk.data().size());
    if (chunk.offset() != received) {
      return absl::InvalidArgumentError(absl::StrCat("chunk ", index, " starts at byte ", chunk.offset(), " but ",
                                                     received,
                                                     " bytes have been received; chunks must be contiguous and "
                                                     "in order"));
    }
    if (size > total - received) {
      return absl::InvalidArgumentError(absl::StrCat("chunk ", index, " (bytes ", received, "..", received + size,
                                                     ") runs past the end of the ", total, "-byte array ",
                                                     ShapeToString(plan.shape), " of ", DTypeName(plan.dtype)));
    }
    if (size > 0) std::memcpy(dst + received, chunk.data().data(), static_cast<size_t>(size));
    received += size;
    ++index;
    TESSERA_RETURN_IF_ERROR(CheckNotCancelled(context));
    if (!reader->Read(&chunk)) break;
  }
  // Read() also fails when the call is cancelled or its deadline passes.
  TESSERA_RETURN_IF_ERROR(CheckNotCancelled(context));
  if (received != total) {
    return absl::DataLossError(absl::StrCat("stream ended after ", received, " of ", total, " bytes of the array ",
                                            ShapeToString(plan.shape), " of ", DTypeName(plan.dtype)));
  }
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
