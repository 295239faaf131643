#include "services/common/chunked_upload.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "services/server/call_checks.h"

namespace tessera {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "ArrayChunk data is little-endian");

absl::StatusOr<ArrayHeader> ValidateArrayHeader(const v1::VolumeHeader& header, int64_t max_bytes) {
  ArrayHeader out;
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

absl::Status ChunkAssembler::Add(const v1::ArrayChunk& chunk,
                                 const std::function<absl::Status(const ArrayHeader&)>& check_header) {
  if (chunks_ == 0) {
    if (!chunk.has_header()) return absl::InvalidArgumentError("the first ArrayChunk must carry the header");
    TESSERA_ASSIGN_OR_RETURN(header_, ValidateArrayHeader(chunk.header(), max_bytes_));
    if (check_header) TESSERA_RETURN_IF_ERROR(check_header(header_));
    header_proto_ = chunk.header();
    TESSERA_ASSIGN_OR_RETURN(array_, NDArray::Allocate(header_.shape, header_.dtype, MemoryKind::kHost));
  } else if (chunk.has_header()) {
    return absl::InvalidArgumentError(absl::StrCat("chunk ", chunks_, " carries a header; only the first may"));
  }
  const int64_t total = header_.nbytes;
  const int64_t size = static_cast<int64_t>(chunk.data().size());
  if (chunk.offset() != received_) {
    return absl::InvalidArgumentError(absl::StrCat("chunk ", chunks_, " starts at byte ", chunk.offset(), " but ",
                                                   received_,
                                                   " bytes have been received; chunks must be contiguous and in order"));
  }
  if (size > total - received_) {
    return absl::InvalidArgumentError(absl::StrCat("chunk ", chunks_, " (bytes ", received_, "..", received_ + size,
                                                   ") runs past the end of the ", total, "-byte array ",
                                                   ShapeToString(header_.shape), " of ", DTypeName(header_.dtype)));
  }
  if (size > 0) {
    std::memcpy(static_cast<char*>(array_.raw_data()) + received_, chunk.data().data(), static_cast<size_t>(size));
  }
  received_ += size;
  ++chunks_;
  return absl::OkStatus();
}

absl::StatusOr<NDArray> ChunkAssembler::Finish() {
  if (chunks_ == 0) return absl::InvalidArgumentError("empty stream: the first ArrayChunk must carry the header");
  if (received_ != header_.nbytes) {
    return absl::DataLossError(absl::StrCat("stream ended after ", received_, " of ", header_.nbytes,
                                            " bytes of the array ", ShapeToString(header_.shape), " of ",
                                            DTypeName(header_.dtype)));
  }
  return std::move(array_);
}

absl::StatusOr<ReceivedArray> ReceiveChunkedArray(const grpc::ServerContextBase& context,
                                                  grpc::ServerReaderInterface<v1::ArrayChunk>* reader,
                                                  int64_t max_bytes,
                                                  const std::function<absl::Status(const ArrayHeader&)>& check_header) {
  ChunkAssembler assembler(max_bytes);
  v1::ArrayChunk chunk;
  if (!reader->Read(&chunk)) {
    return StatusAfterFailedIo(context,
                               absl::InvalidArgumentError("empty stream: the first ArrayChunk must carry the header"));
  }
  do {
    TESSERA_RETURN_IF_ERROR(assembler.Add(chunk, check_header));
    TESSERA_RETURN_IF_ERROR(CheckNotCancelled(context));
  } while (reader->Read(&chunk));
  // Read() also fails when the call is cancelled or its deadline passes.
  TESSERA_RETURN_IF_ERROR(CheckNotCancelled(context));
  ReceivedArray out;
  TESSERA_ASSIGN_OR_RETURN(out.data, assembler.Finish());
  out.header = assembler.header();
  out.header_proto = assembler.header_proto();
  return out;
}

v1::VolumeHeader VolumeHeaderOf(const NDArray& data, const Geometry* geometry, absl::string_view description) {
  v1::VolumeHeader header;
  for (int64_t d : data.shape()) header.add_dims(d);
  header.set_dtype(static_cast<v1::DType>(static_cast<int>(data.dtype())));
  if (geometry != nullptr) {
    for (double v : geometry->spacing) header.add_spacing(v);
    for (double v : geometry->origin) header.add_origin(v);
    for (double v : geometry->direction) header.add_direction(v);
  }
  header.set_description(std::string(description));
  return header;
}

absl::Status SendChunkedArray(const grpc::ServerContextBase& context,
                              grpc::ServerWriterInterface<v1::ArrayChunk>* writer, const v1::VolumeHeader& header,
                              const void* data, int64_t nbytes, int64_t chunk_bytes) {
  if (chunk_bytes <= 0) return absl::InvalidArgumentError("chunk size must be positive");
  const char* bytes = static_cast<const char*>(data);
  int64_t offset = 0;
  do {
    TESSERA_RETURN_IF_ERROR(CheckNotCancelled(context));
    v1::ArrayChunk chunk;
    if (offset == 0) *chunk.mutable_header() = header;
    const int64_t size = std::min(chunk_bytes, nbytes - offset);
    chunk.set_offset(offset);
    if (size > 0) chunk.set_data(bytes + offset, static_cast<size_t>(size));
    if (!writer->Write(chunk)) {
      return StatusAfterFailedIo(context, absl::UnavailableError("the client stopped receiving the stream"));
    }
    offset += size;
  } while (offset < nbytes);
  return absl::OkStatus();
}

int64_t DownloadChunkBytes(int64_t requested, int64_t fallback, int max_send_message_bytes) {
  const int64_t largest = std::max<int64_t>(1024, int64_t{max_send_message_bytes} - 4096);
  return std::clamp<int64_t>(requested > 0 ? requested : fallback, 1, largest);
}

}  // namespace tessera
