#include "tools/som_data/genes_go_cache.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status.h"
#include "tools/som_data/go_corpus.h"

extern char** environ;

namespace tessera {
namespace som {
namespace {

namespace fs = std::filesystem;

constexpr const char* kPackages[] = {"r-bioc-org.hs.eg.db", "r-bioc-go.db"};

std::string CacheRoot() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg != nullptr && *xdg != '\0') return absl::StrCat(xdg, "/tessera");
  const char* home = std::getenv("HOME");
  return absl::StrCat(home != nullptr ? home : "", "/.cache/tessera");
}

bool NonEmptyFile(const std::string& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec) && fs::file_size(path, ec) > 0;
}

std::string Tail(const std::string& path, size_t max_bytes = 600) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::string s = text.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s.size() > max_bytes ? "..." + s.substr(s.size() - max_bytes) : s;
}

// Runs argv in `dir` with stdout and stderr into `log`; FAILED_PRECONDITION
// quoting the log's end unless it exits 0.
absl::Status Run(const std::vector<std::string>& args, const std::string& dir, const std::string& log) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addchdir_np(&actions, dir.c_str());
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  const std::string command = absl::StrJoin(args, " ");
  if (rc != 0) return absl::FailedPreconditionError(absl::StrCat("cannot run `", command, "`: ", std::strerror(rc)));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return absl::InternalError(absl::StrCat("waitpid for `", command, "`: ", std::strerror(errno)));
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat("`", command, "` in ", dir, " failed (",
                                                    WIFEXITED(status) ? absl::StrCat("exit ", WEXITSTATUS(status))
                                                                      : std::string("killed"),
                                                    "): ", Tail(log)));
}

// The .deb of `package` in `dir`, or "".
std::string FindDeb(const std::string& dir, const std::string& package) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(package + "_", 0) == 0 && name.size() > 4 && name.compare(name.size() - 4, 4, ".deb") == 0) {
      return e.path().string();
    }
  }
  return "";
}

// The first file called `name` under `dir`, or "".
std::string FindFile(const std::string& dir, const std::string& name) {
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->path().filename() == name) return it->path().string();
  }
  return "";
}

}  // namespace

absl::StatusOr<GenesGoFiles> EnsureGenesGoCorpus(const GenesGoCacheOptions& options) {
  const std::string root = CacheRoot();
  const std::string out = options.corpus_dir.empty() ? root + "/som_data" : options.corpus_dir;
  const std::string debs = options.debs_dir.empty() ? root + "/debs" : options.debs_dir;
  GenesGoFiles files{out + "/genes_go.csr", out + "/genes_go.rows.txt", out + "/go_features.tsv"};
  if (NonEmptyFile(files.corpus) && NonEmptyFile(files.row_ids) && NonEmptyFile(files.features)) return files;
  auto say = [&](const std::string& line) {
    if (options.progress) options.progress(line);
  };
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) return absl::FailedPreconditionError(absl::StrCat("cannot create ", out, ": ", ec.message()));
  fs::create_directories(debs, ec);
  if (ec) return absl::FailedPreconditionError(absl::StrCat("cannot create ", debs, ": ", ec.message()));
  for (const char* package : kPackages) {
    if (!FindDeb(debs, package).empty()) continue;
    say(absl::StrCat("downloading Debian package ", package, " into ", debs, " (apt-get download)"));
    TESSERA_RETURN_IF_ERROR(Run({"apt-get", "download", package}, debs, debs + "/apt-get.log"));
    if (FindDeb(debs, package).empty()) {
      return absl::FailedPreconditionError(absl::StrCat("apt-get download ", package, " left no .deb in ", debs));
    }
  }
  // Only the SQLite databases are needed (a few hundred MB unpacked, removed after the build).
  const std::string unpacked = debs + "/unpacked-" + std::to_string(getpid());
  fs::create_directories(unpacked, ec);
  if (ec) return absl::FailedPreconditionError(absl::StrCat("cannot create ", unpacked, ": ", ec.message()));
  absl::Status status;
  for (const char* package : kPackages) {
    if (!status.ok()) break;
    say(absl::StrCat("unpacking ", FindDeb(debs, package)));
    status = Run({"dpkg-deb", "-x", FindDeb(debs, package), unpacked}, debs, debs + "/dpkg-deb.log");
  }
  absl::StatusOr<GoCorpora> corpora = absl::UnknownError("not built");
  if (!status.ok()) {
    corpora = status;
  } else {
    const std::string org_db = FindFile(unpacked, "org.Hs.eg.sqlite");
    const std::string go_db = FindFile(unpacked, "GO.sqlite");
    if (org_db.empty()) {
      corpora = absl::FailedPreconditionError(absl::StrCat("org.Hs.eg.sqlite not found in ", FindDeb(debs, kPackages[0])));
    } else {
      say("building the genes x GO corpus");
      corpora = BuildGoCorpora(org_db, go_db, /*with_pubmed=*/false);
    }
  }
  fs::remove_all(unpacked, ec);
  if (!corpora.ok()) return corpora.status();
  // Written next to the final names, then renamed: a cut build leaves no half corpus.
  const std::string staging = out + "/.staging-" + std::to_string(getpid());
  fs::create_directories(staging, ec);
  TESSERA_RETURN_IF_ERROR(WriteGoCorpora(*corpora, staging, /*libsvm=*/false));
  for (const char* name : {"go_features.tsv", "genes_go.rows.txt", "corpora.txt", "genes_go.csr"}) {
    fs::rename(staging + "/" + name, out + "/" + name, ec);
    if (ec) return absl::FailedPreconditionError(absl::StrCat("cannot move ", name, " into ", out, ": ", ec.message()));
  }
  fs::remove_all(staging, ec);
  say(absl::StrCat("cached ", DescribeCorpus("genes x GO", corpora->genes), " in ", out));
  files.built_now = true;
  return files;
}

}  // namespace som
}  // namespace tessera
