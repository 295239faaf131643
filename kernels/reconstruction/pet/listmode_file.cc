// TSLM encoding with explicit little-endian byte order (independent of the host's).
#include "kernels/reconstruction/pet/listmode_file.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status.h"

namespace tessera {
namespace recon {
namespace pet {
namespace {

constexpr char kMagic[4] = {'T', 'S', 'L', 'M'};

void Put32(uint32_t v, char* out) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
void Put16(uint16_t v, char* out) {
  out[0] = static_cast<char>(v & 0xff);
  out[1] = static_cast<char>(v >> 8);
}
uint32_t Get32(const char* in) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<unsigned char>(in[i])) << (8 * i);
  return v;
}
uint16_t Get16(const char* in) {
  return static_cast<uint16_t>(static_cast<unsigned char>(in[0]) | (static_cast<unsigned char>(in[1]) << 8));
}
uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float BitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

void EncodeHeader(const ListModeHeader& h, uint64_t num_events, char* out) {
  std::memcpy(out, kMagic, 4);
  Put32(h.version, out + 4);
  Put32(static_cast<uint32_t>(num_events & 0xffffffffu), out + 8);
  Put32(static_cast<uint32_t>(num_events >> 32), out + 12);
  Put32(h.num_tof_bins, out + 16);
  Put32(FloatBits(h.tof_bin_mm), out + 20);
  Put32(FloatBits(h.tof_fwhm_mm), out + 24);
  Put32(0, out + 28);
}

void EncodeEvent(const ListModeEvent& e, char* out) {
  Put32(e.view, out);
  Put16(e.col, out + 4);
  Put16(e.row, out + 6);
  Put16(static_cast<uint16_t>(e.tof_bin), out + 8);
  Put16(e.weight, out + 10);
}

ListModeEvent DecodeEvent(const char* in) {
  ListModeEvent e;
  e.view = Get32(in);
  e.col = Get16(in + 4);
  e.row = Get16(in + 6);
  e.tof_bin = static_cast<int16_t>(Get16(in + 8));
  e.weight = Get16(in + 10);
  return e;
}

// Parses the 32 header bytes and checks them against the total size.
absl::StatusOr<ListModeHeader> DecodeHeader(const char* in, int64_t total_bytes) {
  if (std::memcmp(in, kMagic, 4) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("not a TSLM list-mode file (magic \"",
                                                   absl::CHexEscape(absl::string_view(in, 4)), "\")"));
  }
  ListModeHeader h;
  h.version = Get32(in + 4);
  if (h.version != kListModeVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat("TSLM version ", h.version, " is not supported (this reader knows ", kListModeVersion, ")"));
  }
  h.num_events = static_cast<uint64_t>(Get32(in + 8)) | (static_cast<uint64_t>(Get32(in + 12)) << 32);
  h.num_tof_bins = Get32(in + 16);
  h.tof_bin_mm = BitsFloat(Get32(in + 20));
  h.tof_fwhm_mm = BitsFloat(Get32(in + 24));
  if (Get32(in + 28) != 0) return absl::InvalidArgumentError("TSLM header: reserved bytes 28-31 must be 0");
  if (h.num_tof_bins < 1 || h.num_tof_bins > static_cast<uint32_t>(kMaxTofBins)) {
    return absl::InvalidArgumentError(
        absl::StrCat("TSLM header: num_tof_bins must be in [1, ", kMaxTofBins, "], got ", h.num_tof_bins));
  }
  if (h.num_tof_bins > 1 && (!std::isfinite(h.tof_bin_mm) || h.tof_bin_mm <= 0 || !std::isfinite(h.tof_fwhm_mm) ||
                             h.tof_fwhm_mm <= 0)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "TSLM header: with %d TOF bins tof_bin_mm and tof_fwhm_mm must be finite and > 0, got %g and %g",
        h.num_tof_bins, h.tof_bin_mm, h.tof_fwhm_mm));
  }
  const int64_t body = total_bytes - kListModeHeaderBytes;
  const uint64_t max_events = static_cast<uint64_t>(INT64_MAX / kListModeEventBytes);
  if (h.num_events > max_events) {
    return absl::InvalidArgumentError(absl::StrCat("TSLM header: num_events ", h.num_events, " is impossible"));
  }
  const int64_t expected = static_cast<int64_t>(h.num_events) * kListModeEventBytes;
  if (body < expected) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TSLM file truncated: the header promises ", h.num_events, " events (", expected + kListModeHeaderBytes,
        " bytes) but there are ", total_bytes, " bytes; event ", body / kListModeEventBytes, " is incomplete"));
  }
  if (body > expected) {
    return absl::InvalidArgumentError(
        absl::StrCat("TSLM file has ", body - expected, " bytes after its ", h.num_events, " events"));
  }
  return h;
}

}  // namespace

ListModeHeader ListModeHeaderFor(const PetGeometry& geometry) {
  ListModeHeader h;
  h.num_tof_bins = static_cast<uint32_t>(geometry.tof.num_bins);
  if (geometry.tof.enabled()) {
    h.tof_bin_mm = static_cast<float>(geometry.tof.bin_mm);
    h.tof_fwhm_mm = static_cast<float>(geometry.tof.fwhm_mm);
  }
  return h;
}

absl::Status CheckListModeHeader(const ListModeHeader& h, const PetGeometry& g) {
  if (static_cast<int64_t>(h.num_tof_bins) != g.tof.num_bins) {
    return absl::InvalidArgumentError(absl::StrCat("list-mode num_tof_bins ", h.num_tof_bins,
                                                   " does not match the geometry's ", g.tof.num_bins));
  }
  if (!g.tof.enabled()) return absl::OkStatus();
  auto close = [](double a, double b) { return std::fabs(a - b) <= 1e-4 * std::fabs(b); };
  if (!close(h.tof_bin_mm, g.tof.bin_mm)) {
    return absl::InvalidArgumentError(absl::StrCat("list-mode tof_bin_mm ", h.tof_bin_mm,
                                                   " does not match the geometry's ", g.tof.bin_mm));
  }
  if (!close(h.tof_fwhm_mm, g.tof.fwhm_mm)) {
    return absl::InvalidArgumentError(absl::StrCat("list-mode tof_fwhm_mm ", h.tof_fwhm_mm,
                                                   " does not match the geometry's ", g.tof.fwhm_mm));
  }
  return absl::OkStatus();
}

absl::Status CheckListModeEvents(const ListModeEvent* events, int64_t n, const PetGeometry& g, int64_t first_index) {
  const int64_t views = g.num_views(), cols = g.cols(), rows = g.rows();
  const int bins = g.tof.num_bins;
  for (int64_t i = 0; i < n; ++i) {
    const ListModeEvent& e = events[i];
    const int64_t k = TofIndex(e, bins);
    if (e.view >= views || e.col >= cols || e.row >= rows || k < 0 || k >= bins) {
      const int64_t number = first_index + i;
      if (e.view >= views) {
        return absl::InvalidArgumentError(
            absl::StrCat("event ", number, ": view ", e.view, " out of range [0, ", views, ")"));
      }
      if (e.col >= cols) {
        return absl::InvalidArgumentError(
            absl::StrCat("event ", number, ": col ", e.col, " out of range [0, ", cols, ")"));
      }
      if (e.row >= rows) {
        return absl::InvalidArgumentError(
            absl::StrCat("event ", number, ": row ", e.row, " out of range [0, ", rows, ")"));
      }
      return absl::InvalidArgumentError(absl::StrCat("event ", number, ": tof_bin ", e.tof_bin, " out of range [",
                                                     -(bins / 2), ", ", bins - bins / 2, ") for ", bins,
                                                     " TOF bins"));
    }
  }
  return absl::OkStatus();
}

std::string EncodeListMode(const ListModeHeader& header, const std::vector<ListModeEvent>& events) {
  std::string out(kListModeHeaderBytes + kListModeEventBytes * events.size(), '\0');
  EncodeHeader(header, events.size(), out.data());
  for (size_t i = 0; i < events.size(); ++i) EncodeEvent(events[i], out.data() + kListModeHeaderBytes + 12 * i);
  return out;
}

absl::StatusOr<ListModeData> DecodeListMode(absl::string_view bytes, const PetGeometry* geometry) {
  if (static_cast<int64_t>(bytes.size()) < kListModeHeaderBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("TSLM file truncated: ", bytes.size(), " bytes, shorter than the 32-byte header"));
  }
  ListModeData data;
  TESSERA_ASSIGN_OR_RETURN(data.header, DecodeHeader(bytes.data(), static_cast<int64_t>(bytes.size())));
  if (geometry != nullptr) TESSERA_RETURN_IF_ERROR(CheckListModeHeader(data.header, *geometry));
  data.events.resize(data.header.num_events);
  for (size_t i = 0; i < data.events.size(); ++i) {
    data.events[i] = DecodeEvent(bytes.data() + kListModeHeaderBytes + 12 * i);
  }
  if (geometry != nullptr) {
    TESSERA_RETURN_IF_ERROR(CheckListModeEvents(data.events.data(), data.events.size(), *geometry));
  }
  return data;
}

absl::Status WriteListModeFile(const std::string& path, const ListModeHeader& header,
                               const std::vector<ListModeEvent>& events) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return absl::NotFoundError(absl::StrCat("cannot create ", path, ": ", std::strerror(errno)));
  char head[kListModeHeaderBytes];
  EncodeHeader(header, events.size(), head);
  out.write(head, sizeof(head));
  constexpr size_t kChunk = 1 << 16;
  std::string buffer(kChunk * kListModeEventBytes, '\0');
  for (size_t begin = 0; begin < events.size(); begin += kChunk) {
    const size_t end = std::min(events.size(), begin + kChunk);
    for (size_t i = begin; i < end; ++i) EncodeEvent(events[i], buffer.data() + 12 * (i - begin));
    out.write(buffer.data(), static_cast<std::streamsize>(12 * (end - begin)));
  }
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("writing ", path, " failed"));
  return absl::OkStatus();
}

absl::StatusOr<ListModeHeader> ReadListModeHeader(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  const int64_t size = static_cast<int64_t>(in.tellg());
  in.seekg(0);
  if (size < kListModeHeaderBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": TSLM file truncated: ", size, " bytes, shorter than the 32-byte header"));
  }
  char head[kListModeHeaderBytes];
  in.read(head, sizeof(head));
  auto header = DecodeHeader(head, size);
  if (!header.ok()) return Annotate(header.status(), path);
  return *header;
}

absl::StatusOr<ListModeData> ReadListModeFile(const std::string& path, const PetGeometry* geometry) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  const int64_t size = static_cast<int64_t>(in.tellg());
  in.seekg(0);
  if (size < kListModeHeaderBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": TSLM file truncated: ", size, " bytes, shorter than the 32-byte header"));
  }
  char head[kListModeHeaderBytes];
  in.read(head, sizeof(head));
  ListModeData data;
  auto header = DecodeHeader(head, size);
  if (!header.ok()) return Annotate(header.status(), path);
  data.header = *header;
  if (geometry != nullptr) {
    if (absl::Status s = CheckListModeHeader(data.header, *geometry); !s.ok()) return Annotate(s, path);
  }
  data.events.resize(data.header.num_events);
  constexpr size_t kChunk = 1 << 16;
  std::string buffer(kChunk * kListModeEventBytes, '\0');
  for (size_t begin = 0; begin < data.events.size(); begin += kChunk) {
    const size_t end = std::min(data.events.size(), begin + kChunk);
    in.read(buffer.data(), static_cast<std::streamsize>(12 * (end - begin)));
    if (!in) return absl::DataLossError(absl::StrCat(path, ": read failed at event ", begin));
    for (size_t i = begin; i < end; ++i) data.events[i] = DecodeEvent(buffer.data() + 12 * (i - begin));
    if (geometry != nullptr) {
      if (absl::Status s = CheckListModeEvents(data.events.data() + begin, end - begin, *geometry, begin); !s.ok()) {
        return Annotate(s, path);
      }
    }
  }
  return data;
}

}  // namespace pet
}  // namespace recon
}  // namespace tessera
