#include "common/dicom/dicom_test_data.h"

#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <cstdlib>

namespace tessera::dicom {
namespace {

bool Has(const std::string& dir) {
  struct stat st;
  return stat((dir + "/ct-series-philips-phantom").c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string Dirname(const std::string& p) {
  const size_t slash = p.rfind('/');
  return slash == std::string::npos ? "." : p.substr(0, slash);
}

}  // namespace

std::string DicomTestDataDir() {
  if (const char* env = std::getenv("TESSERA_DICOM_DATA"); env != nullptr && *env != '\0') {
    return Has(env) ? std::string(env) : std::string();
  }
  for (const char* rel : {"../shared/data/dicom", "../../shared/data/dicom"}) {
    if (Has(rel)) return rel;
  }
  for (const char* env_name : {"TEST_SRCDIR", "RUNFILES_DIR"}) {
    const char* runfiles = std::getenv(env_name);
    if (runfiles == nullptr) continue;
    const std::string marker = std::string(runfiles) + "/tessera/common/dicom/BUILD";
    char resolved[PATH_MAX];
    if (realpath(marker.c_str(), resolved) == nullptr) continue;
    // <root>/common/dicom/BUILD -> <root>/../shared/data/dicom
    const std::string dir = Dirname(Dirname(Dirname(resolved))) + "/../shared/data/dicom";
    if (Has(dir)) return dir;
  }
  if (Has("/work/shared/data/dicom")) return "/work/shared/data/dicom";
  return "";
}

}  // namespace tessera::dicom
