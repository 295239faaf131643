// Arrays moved over gRPC streams as tessera.v1.ArrayChunk messages (the first
// chunk carries the VolumeHeader; data chunks follow contiguously and in
// order, little-endian). Shared by every service that receives or sends
// volumes: VolumeService.DescribeStream, RegistrationService.UploadVolume and
// DownloadResult.
//
//   // Receiving, in a handler:
//   TESSERA_ASSIGN_OR_RETURN(ReceivedArray in,
//                            ReceiveChunkedArray(*context, reader, max_bytes));
//   // Sending:
//   TESSERA_RETURN_IF_ERROR(SendChunkedArray(*context, writer,
//                           VolumeHeaderOf(volume.data, &volume.geometry, ""),
//                           volume.data.raw_data(), volume.data.nbytes(), 1 << 20));
#ifndef TESSERA_SERVICES_COMMON_CHUNKED_UPLOAD_H_
#define TESSERA_SERVICES_COMMON_CHUNKED_UPLOAD_H_

#include <cstdint>
#include <functional>
#include <string>

#include <grpcpp/server_context.h>
#include <grpcpp/support/sync_stream.h>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/ndarray.h"
#include "common/volume.h"
#include "tessera/v1/common.pb.h"

namespace tessera {

// A validated VolumeHeader.
struct ArrayHeader {
  Shape shape;
  DType dtype = DType::kInvalid;
  int64_t nbytes = 0;
  bool has_geometry = false;  // any of spacing/origin/direction given
  Geometry geometry;          // defaults filled in
};

// Validates a header: 1..7 positive dims, a known dtype, at most 3 finite
// positive spacings, at most 3 finite origin entries, and either no direction
// or 9 finite entries forming a non-singular matrix with unit columns; the
// array may not exceed `max_bytes` (RESOURCE_EXHAUSTED).
absl::StatusOr<ArrayHeader> ValidateArrayHeader(const v1::VolumeHeader& header, int64_t max_bytes);

// Reassembles an array from chunks, independently of any transport.
//   ChunkAssembler a(max_bytes);
//   TESSERA_RETURN_IF_ERROR(a.Add(chunk));   // for each chunk, in order
//   TESSERA_ASSIGN_OR_RETURN(NDArray array, a.Finish());
class ChunkAssembler {
 public:
  explicit ChunkAssembler(int64_t max_bytes) : max_bytes_(max_bytes) {}

  // The first chunk must carry the header (validated, then `check_header`,
  // when given, may refuse it, e.g. for lack of space); later chunks must not.
  // INVALID_ARGUMENT for out-of-order or overrunning chunks.
  absl::Status Add(const v1::ArrayChunk& chunk,
                   const std::function<absl::Status(const ArrayHeader&)>& check_header = nullptr);
  // DATA_LOSS unless every byte arrived; INVALID_ARGUMENT when nothing did.
  absl::StatusOr<NDArray> Finish();

  bool started() const { return chunks_ > 0; }
  const ArrayHeader& header() const { return header_; }
  const v1::VolumeHeader& header_proto() const { return header_proto_; }
  int64_t received_bytes() const { return received_; }

 private:
  const int64_t max_bytes_;
  ArrayHeader header_;
  v1::VolumeHeader header_proto_;
  NDArray array_;
  int64_t received_ = 0;
  int64_t chunks_ = 0;
};

struct ReceivedArray {
  v1::VolumeHeader header_proto;  // as sent
  ArrayHeader header;
  NDArray data;                   // host memory, header.shape and dtype
};

// Reads a whole chunk stream (ChunkAssembler's rules), checking for
// cancellation after every chunk. Errors: those of ChunkAssembler, the
// header's (ValidateArrayHeader, `check_header`), INVALID_ARGUMENT for an
// empty stream, CANCELLED / DEADLINE_EXCEEDED.
absl::StatusOr<ReceivedArray> ReceiveChunkedArray(
    const grpc::ServerContextBase& context, grpc::ServerReaderInterface<v1::ArrayChunk>* reader, int64_t max_bytes,
    const std::function<absl::Status(const ArrayHeader&)>& check_header = nullptr);

// The header describing `data` (host or any memory: only shape and dtype are
// read) with `geometry`'s spacing, origin and direction when not null.
v1::VolumeHeader VolumeHeaderOf(const NDArray& data, const Geometry* geometry, absl::string_view description);

// Data bytes per chunk of a download: `requested` when positive, else
// `fallback`, clamped to [1, what fits a message of max_send_message_bytes
// with room for the header] (at least 1024).
int64_t DownloadChunkBytes(int64_t requested, int64_t fallback, int max_send_message_bytes);

// Sends `nbytes` from `data` as chunks of at most `chunk_bytes` (the first
// also carries `header`; an empty array is one chunk with the header),
// checking for cancellation between chunks. CANCELLED / DEADLINE_EXCEEDED, or
// UNAVAILABLE when a write fails otherwise.
absl::Status SendChunkedArray(const grpc::ServerContextBase& context,
                              grpc::ServerWriterInterface<v1::ArrayChunk>* writer, const v1::VolumeHeader& header,
                              const void* data, int64_t nbytes, int64_t chunk_bytes);

}  // namespace tessera

#endif  // TESSERA_SERVICES_COMMON_CHUNKED_UPLOAD_H_
