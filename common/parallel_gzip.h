// Gzip files compressed and decompressed in parallel with libdeflate.
//
// Writing: the input is split into members of `member_bytes` uncompressed
// bytes, each compressed on its own thread as an independent gzip member
// (RFC 1952 allows any number of members; gzip, zlib's gzread, Python's gzip
// module (nibabel), ITK/ANTs and nifti_clib read them as one stream, the way
// they read pigz --independent or bgzip output). Every member carries, in a
// FEXTRA subfield ('T','Z', 4 bytes: the member's total length), its own
// compressed size, so a reader can find all members without decoding them and
// decode them in parallel (the idea of BGZF); readers that do not know the
// subfield skip it, as RFC 1952 requires.
//
// Reading: a whole file held in memory is decoded member by member with
// libdeflate (in parallel when every member carries the subfield, else one
// after another). Any irregularity (truncation, corruption, trailing data)
// returns an error rather than a guess: callers that must describe damage
// precisely (ReadNifti) fall back to their streaming zlib reader.
#ifndef TESSERA_COMMON_PARALLEL_GZIP_H_
#define TESSERA_COMMON_PARALLEL_GZIP_H_

#include <cstdint>
#include <cstdio>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace tessera {

struct GzipWriteOptions {
  int level = 6;                          // libdeflate level, 1 (fastest) .. 12 (smallest); 6 is zlib's default
  int64_t member_bytes = int64_t{4} << 20;  // uncompressed bytes per member (>= 64 KiB)
};

// Compresses the concatenation of `pieces` as gzip members and writes them to
// `file` in order. Each piece starts a new member (a small header piece then
// never shares a member with the bulk data). Memory: about
// 2 * CpuThreads() * member_bytes of compressed output in flight.
// Errors: INVALID_ARGUMENT (level, member_bytes), UNAVAILABLE/INTERNAL (write).
absl::Status WriteGzipMembers(std::FILE* file, const std::vector<absl::string_view>& pieces,
                              const GzipWriteOptions& options = {});

// Decodes the gzip stream `gz` (the whole file) and copies its uncompressed
// bytes [begin, end) to `dst`. Every member is decoded and its CRC-32 and
// length checked, also those outside [begin, end). DATA_LOSS when the stream is
// shorter than `end`, damaged, or (for streams without the size subfield)
// longer than `end`; FAILED_PRECONDITION when it is not gzip at offset 0.
absl::Status InflateGzipRange(absl::string_view gz, int64_t begin, int64_t end, void* dst);

// Whether `gz` starts with a member written by WriteGzipMembers (for tests).
bool HasMemberSizeField(absl::string_view gz);

}  // namespace tessera

#endif  // TESSERA_COMMON_PARALLEL_GZIP_H_
