#include "common/dicom/test_zip.h"

#include <zlib.h>

#include <cstdint>

namespace tessera::dicom {

std::string ZipBytes(const std::vector<std::pair<std::string, std::string>>& files) {
  std::string out, central;
  auto u16 = [](std::string* s, uint32_t v) { s->push_back(char(v & 0xff)); s->push_back(char((v >> 8) & 0xff)); };
  auto u32 = [&](std::string* s, uint32_t v) { u16(s, v & 0xffff); u16(s, v >> 16); };
  for (const auto& [name, bytes] : files) {
    std::string packed(compressBound(bytes.size()) + 64, '\0');
    z_stream zs{};
    if (deflateInit2(&zs, 6, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) return "";
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
    zs.avail_in = bytes.size();
    zs.next_out = reinterpret_cast<Bytef*>(packed.data());
    zs.avail_out = packed.size();
    const int deflated = deflate(&zs, Z_FINISH);
    packed.resize(zs.total_out);
    deflateEnd(&zs);
    if (deflated != Z_STREAM_END) return "";
    const uint32_t crc = crc32(0, reinterpret_cast<const Bytef*>(bytes.data()), bytes.size());
    const uint32_t offset = out.size();
    for (std::string* h : {&out, &central}) {
      h->append(h == &out ? "PK\x03\x04" : "PK\x01\x02");
      if (h == &central) u16(h, 20);
      u16(h, 20), u16(h, 0), u16(h, 8), u16(h, 0), u16(h, 0);
      u32(h, crc), u32(h, packed.size()), u32(h, bytes.size());
      u16(h, name.size()), u16(h, 0);
      if (h == &central) u16(h, 0), u16(h, 0), u16(h, 0), u32(h, 0), u32(h, offset);
      h->append(name);
      if (h == &out) h->append(packed);
    }
  }
  const uint32_t cd_offset = out.size();
  out += central;
  out.append("PK\x05\x06");
  u16(&out, 0), u16(&out, 0), u16(&out, files.size()), u16(&out, files.size());
  u32(&out, central.size()), u32(&out, cd_offset), u16(&out, 0);
  return out;
}

}  // namespace tessera::dicom
