#include "services/gateway/embedded_files.h"

namespace tessera::gateway {

const EmbeddedFile* FindEmbedded(const std::vector<EmbeddedFile>& files, absl::string_view path) {
  for (const EmbeddedFile& f : files) {
    if (path == f.path) return &f;
  }
  return nullptr;
}

}  // namespace tessera::gateway
