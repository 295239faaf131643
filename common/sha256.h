// Streaming SHA-256 (OpenSSL libcrypto): content checksums (atlas manifests)
// and request fingerprints (jobs). Unlike a CRC-32 over a file that ends in
// its own CRC-32 (the same constant for every such file), a digest of the
// bytes changes whenever they do.
#ifndef TESSERA_COMMON_SHA256_H_
#define TESSERA_COMMON_SHA256_H_

#include <cstddef>
#include <memory>
#include <string>

namespace tessera {

class Sha256Stream {
 public:
  Sha256Stream();
  ~Sha256Stream();
  Sha256Stream(const Sha256Stream&) = delete;
  Sha256Stream& operator=(const Sha256Stream&) = delete;

  void Update(const void* data, size_t size);
  // 64 lowercase hex digits of everything Update saw; ends the stream.
  std::string HexDigest();

 private:
  struct Context;
  std::unique_ptr<Context> context_;
};

// The digest of one buffer.
std::string Sha256Hex(const void* data, size_t size);

}  // namespace tessera

#endif  // TESSERA_COMMON_SHA256_H_
