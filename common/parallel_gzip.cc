#include "common/parallel_gzip.h"

#include <libdeflate.h>
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <new>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/parallel.h"

namespace tessera {
namespace {

// Member layout (20-byte header): 10-byte gzip header with FLG.FEXTRA, XLEN = 8, subfield
// 'T' 'Z' LEN = 4 holding the member's total length; deflate data; CRC-32 and
// ISIZE (little endian).
constexpr size_t kMemberHeader = 20;
constexpr size_t kMemberTrailer = 8;
constexpr int64_t kMinMemberBytes = int64_t{1} << 16;
constexpr int64_t kMaxMemberBytes = int64_t{1} << 30;  // ISIZE and the size field are 32-bit

void PutLe32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

uint32_t GetLe32(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

bool IsTaggedMemberHeader(const uint8_t* p, size_t available) {
  return available >= kMemberHeader + kMemberTrailer && p[0] == 0x1f && p[1] == 0x8b && p[2] == 8 && p[3] == 0x04 &&
         p[10] == 8 && p[11] == 0 && p[12] == 'T' && p[13] == 'Z' && p[14] == 4 && p[15] == 0;
}

struct CompressorDeleter {
  void operator()(libdeflate_compressor* c) const { libdeflate_free_compressor(c); }
};
struct DecompressorDeleter {
  void operator()(libdeflate_decompressor* d) const { libdeflate_free_decompressor(d); }
};

// One member of `in`; empty on failure (allocation).
std::string CompressMember(libdeflate_compressor* c, absl::string_view in) {
  const size_t bound = libdeflate_deflate_compress_bound(c, in.size());
  std::string out(kMemberHeader + bound + kMemberTrailer, '\0');
  uint8_t* p = reinterpret_cast<uint8_t*>(&out[0]);
  const size_t deflated = libdeflate_deflate_compress(c, in.data(), in.size(), p + kMemberHeader, bound);
  if (deflated == 0) return std::string();
  const size_t total = kMemberHeader + deflated + kMemberTrailer;
  const uint8_t header[14] = {0x1f, 0x8b, 8, 0x04, 0, 0, 0, 0, 0, 3 /* Unix */, 8, 0, 'T', 'Z'};
  std::memcpy(p, header, sizeof(header));
  p[14] = 4;
  p[15] = 0;
  PutLe32(p + 16, static_cast<uint32_t>(total));
  PutLe32(p + kMemberHeader + deflated, libdeflate_crc32(0, in.data(), in.size()));
  PutLe32(p + kMemberHeader + deflated + 4, static_cast<uint32_t>(in.size()));
  out.resize(total);
  return out;
}

struct Member {
  size_t pos = 0, size = 0;    // in the compressed stream
  int64_t start = 0, isize = 0;  // in the uncompressed stream
};

const char* ResultName(libdeflate_result r) {
  switch (r) {
    case LIBDEFLATE_SUCCESS: return "success";
    case LIBDEFLATE_BAD_DATA: return "corrupt data";
    case LIBDEFLATE_SHORT_OUTPUT: return "short output";
    case LIBDEFLATE_INSUFFICIENT_SPACE: return "more data than expected";
  }
  return "unknown libdeflate error";
}

// Members of a stream written by WriteGzipMembers; empty when `gz` is not one
// (or is truncated, which the sequential path then reports).
std::vector<Member> TaggedMembers(absl::string_view gz) {
  const uint8_t* p = reinterpret_cast<const uint8_t*>(gz.data());
  std::vector<Member> members;
  size_t pos = 0;
  int64_t start = 0;
  while (pos < gz.size()) {
    if (!IsTaggedMemberHeader(p + pos, gz.size() - pos)) return {};
    const size_t size = GetLe32(p + pos + 16);
    if (size < kMemberHeader + kMemberTrailer || size > gz.size() - pos) return {};
    const int64_t isize = GetLe32(p + pos + size - 4);
    // DEFLATE expands at most 1032:1; a larger ISIZE is damage (and must not
    // size a scratch buffer). The sequential path then reports it.
    if (isize > kMaxMemberBytes || isize > 1032 * static_cast<int64_t>(size)) return {};
    members.push_back(Member{pos, size, start, isize});
    pos += size;
    start += isize;
  }
  return members;
}

absl::Status InflateTagged(absl::string_view gz, const std::vector<Member>& members, int64_t begin, int64_t end,
                           uint8_t* dst) {
  const int64_t total = members.back().start + members.back().isize;
  if (total < end) {
    return absl::DataLossError(absl::StrCat("gzip stream holds ", total, " bytes, expected at least ", end));
  }
  std::vector<std::unique_ptr<libdeflate_decompressor, DecompressorDeleter>> decompressors(CpuThreads());
  std::mutex mu;
  absl::Status first_error;
  ParallelForDynamic(static_cast<int64_t>(members.size()), 1, [&](int64_t lo, int64_t hi, int worker) {
    auto& d = decompressors[worker];
    if (d == nullptr) d.reset(libdeflate_alloc_decompressor());
    for (int64_t i = lo; i < hi; ++i) {
      const Member& m = members[i];
      const bool direct = m.start >= begin && m.start + m.isize <= end;
      std::string scratch;
      if (!direct) scratch.resize(static_cast<size_t>(m.isize));
      uint8_t* out = direct ? dst + (m.start - begin) : reinterpret_cast<uint8_t*>(&scratch[0]);
      size_t in_used = 0, out_used = 0;
      const libdeflate_result r =
          d == nullptr ? LIBDEFLATE_BAD_DATA
                       : libdeflate_gzip_decompress_ex(d.get(), gz.data() + m.pos, m.size, out,
                                                       static_cast<size_t>(m.isize), &in_used, &out_used);
      if (r != LIBDEFLATE_SUCCESS || in_used != m.size || out_used != static_cast<size_t>(m.isize)) {
        std::lock_guard<std::mutex> lock(mu);
        if (first_error.ok()) {
          first_error = absl::DataLossError(absl::StrCat("gzip member at byte ", m.pos, ": ",
                                                         d == nullptr ? "cannot allocate a decompressor"
                                                                      : ResultName(r)));
        }
        continue;
      }
      if (!direct) {
        const int64_t a = std::max(begin, m.start), b = std::min(end, m.start + m.isize);
        if (a < b) std::memcpy(dst + (a - begin), out + (a - m.start), static_cast<size_t>(b - a));
      }
    }
  });
  return first_error;
}

absl::Status InflateSequential(absl::string_view gz, int64_t begin, int64_t end, uint8_t* dst) {
  std::unique_ptr<libdeflate_decompressor, DecompressorDeleter> d(libdeflate_alloc_decompressor());
  if (d == nullptr) return absl::ResourceExhaustedError("cannot allocate a decompressor");
  // Members may end anywhere, so decode everything up to `end` contiguously
  // (libdeflate needs one output buffer per member), then copy [begin, end).
  // MAP_POPULATE: the pages are made in one call rather than one fault each
  // (page faults dominated this copy on virtual machines).
  const size_t bytes = static_cast<size_t>(std::max<int64_t>(end, 1));
  void* mapped = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (mapped == MAP_FAILED) return absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", end, " bytes"));
  std::unique_ptr<uint8_t, std::function<void(uint8_t*)>> out(static_cast<uint8_t*>(mapped),
                                                               [bytes](uint8_t* p) { munmap(p, bytes); });
  const uint8_t* p = reinterpret_cast<const uint8_t*>(gz.data());
  size_t pos = 0;
  int64_t produced = 0;
  while (pos + 2 <= gz.size() && p[pos] == 0x1f && p[pos + 1] == 0x8b) {
    size_t in_used = 0, out_used = 0;
    const libdeflate_result r = libdeflate_gzip_decompress_ex(d.get(), p + pos, gz.size() - pos, out.get() + produced,
                                                              static_cast<size_t>(end - produced), &in_used, &out_used);
    if (r != LIBDEFLATE_SUCCESS) {
      return absl::DataLossError(absl::StrCat("gzip member at byte ", pos, ": ", ResultName(r)));
    }
    pos += in_used;
    produced += static_cast<int64_t>(out_used);
  }
  if (produced < end) {
    return absl::DataLossError(absl::StrCat("gzip stream holds ", produced, " bytes, expected ", end));
  }
  std::memcpy(dst, out.get() + begin, static_cast<size_t>(end - begin));
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteGzipMembers(std::FILE* file, const std::vector<absl::string_view>& pieces,
                              const GzipWriteOptions& options) {
  if (options.level < 1 || options.level > 12) {
    return absl::InvalidArgumentError(absl::StrCat("gzip level must be 1..12, not ", options.level));
  }
  if (options.member_bytes < kMinMemberBytes || options.member_bytes > kMaxMemberBytes) {
    return absl::InvalidArgumentError(absl::StrCat("gzip member_bytes must be ", kMinMemberBytes, "..",
                                                   kMaxMemberBytes, ", not ", options.member_bytes));
  }
  std::vector<absl::string_view> inputs;
  for (absl::string_view piece : pieces) {
    for (size_t at = 0; at < piece.size(); at += static_cast<size_t>(options.member_bytes)) {
      inputs.push_back(piece.substr(at, static_cast<size_t>(options.member_bytes)));
    }
  }
  if (inputs.empty()) inputs.push_back(absl::string_view());  // an empty file is not gzip; one empty member is

  const int threads = CpuThreads();
  std::vector<std::unique_ptr<libdeflate_compressor, CompressorDeleter>> compressors(threads);
  // Batches of 2 members per thread bound the compressed output held in memory.
  const size_t batch = static_cast<size_t>(2 * threads);
  std::vector<std::string> out(std::min(batch, inputs.size()));
  for (size_t first = 0; first < inputs.size(); first += batch) {
    const size_t count = std::min(batch, inputs.size() - first);
    ParallelForDynamic(static_cast<int64_t>(count), 1, [&](int64_t lo, int64_t hi, int worker) {
      auto& c = compressors[worker];
      if (c == nullptr) c.reset(libdeflate_alloc_compressor(options.level));
      for (int64_t i = lo; i < hi; ++i) {
        out[i] = c == nullptr ? std::string() : CompressMember(c.get(), inputs[first + i]);
      }
    });
    for (size_t i = 0; i < count; ++i) {
      if (out[i].empty()) return absl::ResourceExhaustedError("cannot allocate libdeflate compression memory");
      errno = 0;
      if (std::fwrite(out[i].data(), 1, out[i].size(), file) != out[i].size()) {
        const int err = errno;
        return absl::UnavailableError(absl::StrCat("write failed: ", err ? std::strerror(err) : "short write"));
      }
      std::string().swap(out[i]);
    }
  }
  return absl::OkStatus();
}

absl::Status InflateGzipRange(absl::string_view gz, int64_t begin, int64_t end, void* dst) {
  if (begin < 0 || end < begin) {
    return absl::InvalidArgumentError(absl::StrCat("bad byte range [", begin, ", ", end, ")"));
  }
  if (gz.size() < 2 || static_cast<uint8_t>(gz[0]) != 0x1f || static_cast<uint8_t>(gz[1]) != 0x8b) {
    return absl::FailedPreconditionError("not a gzip stream");
  }
  uint8_t* out = static_cast<uint8_t*>(dst);
  const std::vector<Member> members = TaggedMembers(gz);
  if (!members.empty()) return InflateTagged(gz, members, begin, end, out);
  return InflateSequential(gz, begin, end, out);
}

bool HasMemberSizeField(absl::string_view gz) {
  return IsTaggedMemberHeader(reinterpret_cast<const uint8_t*>(gz.data()), gz.size());
}

}  // namespace tessera
