#include "common/dicom/zip_reader.h"

#include <zlib.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace tessera::dicom {
namespace {

uint16_t U16(const std::string& s, size_t at) {
  return static_cast<uint16_t>(static_cast<uint8_t>(s[at]) | (static_cast<uint8_t>(s[at + 1]) << 8));
}
uint32_t U32(const std::string& s, size_t at) {
  return static_cast<uint32_t>(U16(s, at)) | (static_cast<uint32_t>(U16(s, at + 2)) << 16);
}

absl::StatusOr<std::string> Inflate(const char* data, size_t size, size_t expected) {
  std::string out(expected, '\0');
  z_stream zs{};
  if (inflateInit2(&zs, -MAX_WBITS) != Z_OK) return absl::InternalError("inflateInit2 failed");
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data));
  zs.avail_in = static_cast<uInt>(size);
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(expected);
  const int rc = inflate(&zs, Z_FINISH);
  const size_t produced = expected - zs.avail_out;
  inflateEnd(&zs);
  if (rc != Z_STREAM_END || produced != expected) {
    return absl::InvalidArgumentError(absl::StrCat("deflate data damaged (", produced, " of ", expected, " bytes)"));
  }
  return out;
}

}  // namespace

bool LooksLikeZip(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char sig[4] = {};
  if (!in.read(sig, 4)) return false;
  return std::memcmp(sig, "PK\x03\x04", 4) == 0 || std::memcmp(sig, "PK\x05\x06", 4) == 0;
}

absl::StatusOr<std::vector<ZipMember>> ReadZip(const std::string& path, int64_t max_total_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string s = ss.str();
  auto bad = [&](const std::string& why) { return absl::InvalidArgumentError(absl::StrCat(path, ": zip: ", why)); };
  // End of central directory: the last "PK\5\6" within the final 64 KiB + 22 bytes.
  if (s.size() < 22) return bad("too short for a zip archive");
  size_t eocd = std::string::npos;
  const size_t lowest = s.size() > 65557 ? s.size() - 65557 : 0;
  for (size_t at = s.size() - 22 + 1; at-- > lowest;) {
    if (std::memcmp(s.data() + at, "PK\x05\x06", 4) == 0) {
      eocd = at;
      break;
    }
  }
  if (eocd == std::string::npos) return bad("no end of central directory");
  const uint16_t entries = U16(s, eocd + 10);
  const uint32_t cd_size = U32(s, eocd + 12);
  const uint32_t cd_offset = U32(s, eocd + 16);
  if (cd_offset == 0xffffffffu || entries == 0xffff) return bad("zip64 archives are not supported");
  if (static_cast<uint64_t>(cd_offset) + cd_size > eocd) return bad("central directory out of range");
  std::vector<ZipMember> out;
  int64_t total = 0;
  size_t at = cd_offset;
  for (int e = 0; e < entries; ++e) {
    if (at + 46 > eocd || std::memcmp(s.data() + at, "PK\x01\x02", 4) != 0) return bad("damaged central directory");
    const uint16_t flags = U16(s, at + 8);
    const uint16_t method = U16(s, at + 10);
    const uint32_t csize = U32(s, at + 20);
    const uint32_t usize = U32(s, at + 24);
    const uint16_t name_len = U16(s, at + 28);
    const uint16_t extra_len = U16(s, at + 30);
    const uint16_t comment_len = U16(s, at + 32);
    const uint32_t local = U32(s, at + 42);
    if (at + 46 + name_len > eocd) return bad("damaged central directory");
    std::string name = s.substr(at + 46, name_len);
    at += 46 + name_len + extra_len + comment_len;
    if (!name.empty() && name.back() == '/') continue;  // directory
    auto bad_member = [&](const std::string& why) { return bad(absl::StrCat(name, ": ", why)); };
    if (flags & 1) return bad_member("encrypted members are not supported");
    if (csize == 0xffffffffu || usize == 0xffffffffu || local == 0xffffffffu) return bad_member("zip64 member");
    if (static_cast<uint64_t>(local) + 30 > s.size() || std::memcmp(s.data() + local, "PK\x03\x04", 4) != 0) {
      return bad_member("damaged local header");
    }
    const size_t data_at = static_cast<size_t>(local) + 30 + U16(s, local + 26) + U16(s, local + 28);
    if (data_at + csize > s.size()) return bad_member("data past the end of the archive");
    total += usize;
    if (total > max_total_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(path, ": zip members exceed ", max_total_bytes, " bytes"));
    }
    ZipMember m;
    m.name = name;
    if (method == 0) {
      if (csize != usize) return bad_member("stored member with differing sizes");
      m.bytes = s.substr(data_at, csize);
    } else if (method == 8) {
      auto inflated = Inflate(s.data() + data_at, csize, usize);
      if (!inflated.ok()) return bad_member(std::string(inflated.status().message()));
      m.bytes = std::move(*inflated);
    } else {
      return bad_member(absl::StrCat("compression method ", method, " is not supported (stored and deflate are)"));
    }
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace tessera::dicom
