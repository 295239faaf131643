#include "services/fingerprint/formats/fvc_data.h"

#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status.h"
#include "services/fingerprint/formats/template_io.h"

namespace tessera {
namespace fingerprint {
namespace {

bool IsDir(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string Dirname(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

}  // namespace

absl::StatusOr<std::string> FindFingerprintDataDir() {
  std::vector<std::string> tried;
  auto check = [&tried](const std::string& dir) {
    tried.push_back(dir);
    return IsDir(dir + "/fvc2002");
  };
  if (const char* env = std::getenv("TESSERA_FINGERPRINT_DATA"); env != nullptr && *env != '\0') {
    if (check(env)) return std::string(env);
    return absl::NotFoundError(
        absl::StrCat("TESSERA_FINGERPRINT_DATA=", env, " has no fvc2002/ directory"));
  }
  // From the project root when run there (bazel-bin binaries, tools).
  for (const char* rel : {"../shared/data/fingerprint", "../../shared/data/fingerprint"}) {
    if (check(rel)) return std::string(rel);
  }
  // From a runfile symlink back into the source tree (bazel test).
  for (const char* env_name : {"TEST_SRCDIR", "RUNFILES_DIR"}) {
    const char* runfiles = std::getenv(env_name);
    if (runfiles == nullptr) continue;
    const std::string marker = absl::StrCat(runfiles, "/tessera/services/fingerprint/BUILD");
    char resolved[PATH_MAX];
    if (realpath(marker.c_str(), resolved) == nullptr) continue;
    // <root>/services/fingerprint/BUILD -> <root>/../shared/data/fingerprint
    const std::string root = Dirname(Dirname(Dirname(resolved)));
    const std::string dir = root + "/../shared/data/fingerprint";
    if (check(dir)) return dir;
  }
  // Next to a gathered GPU binary: <DEST>/bin/<binary> -> <DEST>/data/fingerprint
  // (tools/gpu/gather.sh layout, when the data is copied there).
  char exe[PATH_MAX];
  const ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (len > 0) {
    exe[len] = '\0';
    const std::string dir = Dirname(Dirname(exe)) + "/data/fingerprint";
    if (check(dir)) return dir;
  }
  if (check("/work/shared/data/fingerprint")) return std::string("/work/shared/data/fingerprint");
  return absl::NotFoundError(absl::StrCat("fingerprint data not found (set TESSERA_FINGERPRINT_DATA); tried ",
                                          absl::StrJoin(tried, ", ")));
}

absl::StatusOr<std::vector<FvcImpression>> LoadFvc2002(const std::string& data_dir, int db) {
  if (db < 1 || db > 4) return absl::InvalidArgumentError(absl::StrCat("FVC2002 has DB1..DB4, not DB", db));
  std::vector<FvcImpression> out;
  for (int finger = 101; finger <= 110; ++finger) {
    for (int impression = 1; impression <= 8; ++impression) {
      FvcImpression imp;
      imp.finger = finger;
      imp.impression = impression;
      imp.path = absl::StrCat(data_dir, "/fvc2002/DB", db, "_B/", finger, "_", impression, ".iso");
      TESSERA_ASSIGN_OR_RETURN(std::vector<Template> views, ReadTemplateFile(imp.path));
      if (views.size() != 1) {
        return absl::InvalidArgumentError(absl::StrCat(imp.path, ": ", views.size(), " finger views, expected 1"));
      }
      imp.view = std::move(views[0]);
      out.push_back(std::move(imp));
    }
  }
  return out;
}

}  // namespace fingerprint
}  // namespace tessera
