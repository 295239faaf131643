#include "common/sha256.h"

#include <openssl/evp.h>

#include <cstdlib>

#include "absl/strings/escaping.h"
#include "absl/strings/string_view.h"

namespace tessera {

struct Sha256Stream::Context {
  EVP_MD_CTX* ctx = nullptr;
  ~Context() { EVP_MD_CTX_free(ctx); }
};

Sha256Stream::Sha256Stream() : context_(std::make_unique<Context>()) {
  context_->ctx = EVP_MD_CTX_new();
  // Only allocation can fail here; there is no sensible way to go on without it.
  if (context_->ctx == nullptr || EVP_DigestInit_ex(context_->ctx, EVP_sha256(), nullptr) != 1) std::abort();
}

Sha256Stream::~Sha256Stream() = default;

void Sha256Stream::Update(const void* data, size_t size) {
  if (size > 0) EVP_DigestUpdate(context_->ctx, data, size);
}

std::string Sha256Stream::HexDigest() {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(context_->ctx, out, &len);
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(out), len));
}

std::string Sha256Hex(const void* data, size_t size) {
  Sha256Stream s;
  s.Update(data, size);
  return s.HexDigest();
}

}  // namespace tessera
