#include "services/jobs/testing/postgres_server.h"

#include <fcntl.h>
#include <glob.h>
#include <postgresql/libpq-fe.h>
#include <pwd.h>
#include <spawn.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

extern char** environ;

namespace tessera::jobs::testing {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string Tail(const std::string& text, size_t max = 1500) {
  std::string t(absl::StripAsciiWhitespace(text));
  return t.size() <= max ? t : absl::StrCat("...", t.substr(t.size() - max));
}

// Runs argv (argv[0] an absolute path) in directory `cwd` (PostgreSQL's
// tools fail where the postgres user cannot read the current directory) with
// stdin from /dev/null and stdout+stderr into `output_path`; returns the exit status (-1 when it could
// not be started or was killed) and the output in *output.
int Run(const std::vector<std::string>& argv, const std::string& cwd, const std::string& output_path,
        std::string* output) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addchdir_np(&actions, cwd.c_str());
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, output_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    *output = absl::StrCat("cannot start ", argv[0], ": ", std::strerror(rc));
    return -1;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  *output = ReadFile(output_path);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

bool Executable(const std::string& path) { return access(path.c_str(), X_OK) == 0; }

// The newest /usr/lib/postgresql/<version>/bin holding initdb and pg_ctl.
std::string FindBinDir() {
  glob_t g;
  std::string best;
  int best_version = -1;
  if (glob("/usr/lib/postgresql/*/bin", GLOB_ONLYDIR, nullptr, &g) == 0) {
    for (size_t i = 0; i < g.gl_pathc; ++i) {
      const std::string dir = g.gl_pathv[i];
      std::vector<std::string> parts = absl::StrSplit(dir, '/');  // "", usr, lib, postgresql, 15, bin
      int version = 0;
      if (parts.size() < 2 || !absl::SimpleAtoi(parts[parts.size() - 2], &version)) version = 0;
      if (Executable(dir + "/initdb") && Executable(dir + "/pg_ctl") && version > best_version) {
        best = dir;
        best_version = version;
      }
    }
  }
  globfree(&g);
  return best;
}

std::string FindRunuser() {
  for (const char* p : {"/usr/sbin/runuser", "/sbin/runuser", "/usr/bin/runuser", "/bin/runuser"}) {
    if (Executable(p)) return p;
  }
  return "";
}

constexpr char kDirPrefix[] = "/tmp/tessera-pg.";

std::vector<std::string> ServerPrefix(bool as_postgres) {
  if (!as_postgres) return {};
  return {FindRunuser(), "-u", "postgres", "--"};
}

// `pg_ctl stop -m immediate` on `dir`/data, then removes `dir`.
void StopAndRemove(const std::string& bin_dir, const std::string& dir, bool running, bool as_postgres) {
  if (running) {
    std::vector<std::string> stop = ServerPrefix(as_postgres);
    for (const std::string& a : {bin_dir + "/pg_ctl", std::string("stop"), std::string("-w"), std::string("-m"),
                                 std::string("immediate"), std::string("-D"), dir + "/data"}) {
      stop.push_back(a);
    }
    std::string output;
    (void)Run(stop, dir, dir + "/command.log", &output);
  }
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
}

// "<pid> <pid namespace>" of this process: a pid means something only in
// its namespace (Bazel's sandbox has its own).
std::string OwnerId() {
  char ns[128] = {0};
  const ssize_t n = readlink("/proc/self/ns/pid", ns, sizeof(ns) - 1);
  return absl::StrCat(getpid(), " ", n > 0 ? std::string(ns, n) : std::string("?"));
}

// Servers whose test process died without its destructor (a test killed at
// its timeout) would run forever: each directory names its owner, and those
// whose owner is gone (same pid namespace, no such process) are stopped and
// removed.
void ReapOrphans(const std::string& bin_dir, bool as_postgres) {
  const std::vector<std::string> self = absl::StrSplit(OwnerId(), ' ');
  glob_t g;
  if (glob(absl::StrCat(kDirPrefix, "*/owner").c_str(), 0, nullptr, &g) == 0) {
    for (size_t i = 0; i < g.gl_pathc; ++i) {
      const std::string owner_file = g.gl_pathv[i];
      const std::vector<std::string> owner =
          absl::StrSplit(absl::StripAsciiWhitespace(ReadFile(owner_file)), ' ');
      int pid = 0;
      if (owner.size() != 2 || owner[1] != self[1] || !absl::SimpleAtoi(owner[0], &pid) || pid <= 0) continue;
      if (kill(pid, 0) == 0 || errno != ESRCH) continue;  // alive
      const std::string dir = owner_file.substr(0, owner_file.size() - std::string("/owner").size());
      StopAndRemove(bin_dir, dir, access((dir + "/data/postmaster.pid").c_str(), F_OK) == 0, as_postgres);
    }
  }
  globfree(&g);
}

struct PqResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};

}  // namespace

absl::StatusOr<std::unique_ptr<PostgresServer>> PostgresServer::Start() {
  std::unique_ptr<PostgresServer> server(new PostgresServer());
  server->bin_dir_ = FindBinDir();
  if (server->bin_dir_.empty()) {
    return absl::FailedPreconditionError(
        "no PostgreSQL server binaries (initdb, pg_ctl under /usr/lib/postgresql/*/bin): apt-get install postgresql");
  }
  std::vector<std::string> prefix;  // how the server's binaries are run
  uid_t uid = 0;
  gid_t gid = 0;
  if (geteuid() == 0) {
    const struct passwd* pw = getpwnam("postgres");
    if (pw == nullptr) {
      return absl::FailedPreconditionError(
          "running as root and there is no 'postgres' user to own the test cluster (initdb refuses root)");
    }
    const std::string runuser = FindRunuser();
    if (runuser.empty()) {
      return absl::FailedPreconditionError("running as root and there is no runuser to start initdb as 'postgres'");
    }
    uid = pw->pw_uid;
    gid = pw->pw_gid;
    server->as_postgres_ = true;
    prefix = ServerPrefix(true);
  }

  ReapOrphans(server->bin_dir_, server->as_postgres_);

  // Short: the server's unix socket path must fit in 107 bytes.
  std::string tmpl = absl::StrCat(kDirPrefix, "XXXXXX");
  if (mkdtemp(tmpl.data()) == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("cannot create a directory under /tmp: ", std::strerror(errno)));
  }
  server->dir_ = tmpl;
  std::ofstream(server->dir_ + "/owner") << OwnerId() << "\n";
  if (server->as_postgres_ && chown(tmpl.c_str(), uid, gid) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot give ", server->dir_, " to the postgres user: ", std::strerror(errno),
                     errno == EINVAL ? " (root inside a user namespace, such as Bazel's linux-sandbox: tag the test "
                                       "\"no-sandbox\")"
                                     : ""));
  }
  const std::string data = server->dir_ + "/data";
  const std::string log = server->dir_ + "/log";
  // Written by us (root or not), not by the server's user.
  const std::string command_log = server->dir_ + "/command.log";

  std::vector<std::string> initdb = prefix;
  for (const std::string& a : {server->bin_dir_ + "/initdb", std::string("-D"), data, std::string("-A"),
                               std::string("trust"), std::string("-U"), std::string("postgres"),
                               std::string("--no-sync"), std::string("-E"), std::string("UTF8"),
                               std::string("--locale=C")}) {
    initdb.push_back(a);
  }
  std::string output;
  if (Run(initdb, server->dir_, command_log, &output) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("initdb failed (", absl::StrJoin(initdb, " "), "): ", Tail(output)));
  }

  std::string failures;
  for (int attempt = 0; attempt < 5 && !server->running_; ++attempt) {
    server->port_ = 20000 + (static_cast<int>(getpid()) + 997 * attempt) % 10000;
    std::vector<std::string> start = prefix;
    for (const std::string& a :
         {server->bin_dir_ + "/pg_ctl", std::string("start"), std::string("-w"), std::string("-t"), std::string("60"),
          std::string("-D"), data, std::string("-l"), log, std::string("-o"),
          absl::StrCat("-k ", server->dir_, " -c listen_addresses='' -F -p ", server->port_)}) {
      start.push_back(a);
    }
    if (Run(start, server->dir_, command_log, &output) == 0) {
      server->running_ = true;
    } else {
      absl::StrAppend(&failures, "\nport ", server->port_, ": ", Tail(output, 500), "\nserver log: ",
                      Tail(ReadFile(log), 1000));
    }
  }
  if (!server->running_) {
    return absl::FailedPreconditionError(absl::StrCat("pg_ctl start failed:", failures));
  }

  // The test database, and the server's version for the logs.
  std::unique_ptr<PGconn, void (*)(PGconn*)> conn(PQconnectdb(server->conninfo("postgres").c_str()), PQfinish);
  if (conn == nullptr || PQstatus(conn.get()) != CONNECTION_OK) {
    return absl::InternalError(absl::StrCat("cannot connect to the test server (", server->conninfo("postgres"),
                                            "): ", conn ? PQerrorMessage(conn.get()) : "out of memory"));
  }
  std::unique_ptr<PGresult, PqResultDeleter> result(PQexec(conn.get(), "SELECT version()"));
  if (PQresultStatus(result.get()) != PGRES_TUPLES_OK) {
    return absl::InternalError(absl::StrCat("SELECT version(): ", PQerrorMessage(conn.get())));
  }
  server->version_ = PQgetvalue(result.get(), 0, 0);
  result.reset(PQexec(conn.get(), "CREATE DATABASE tessera"));
  if (PQresultStatus(result.get()) != PGRES_COMMAND_OK) {
    return absl::InternalError(absl::StrCat("CREATE DATABASE tessera: ", PQerrorMessage(conn.get())));
  }
  return server;
}

PostgresServer::~PostgresServer() { Stop(); }

void PostgresServer::Stop() {
  if (dir_.empty()) return;
  StopAndRemove(bin_dir_, dir_, running_, as_postgres_);
  running_ = false;
  dir_.clear();
}

std::string PostgresServer::conninfo() const { return conninfo("tessera"); }

std::string PostgresServer::conninfo(const std::string& dbname) const {
  return absl::StrCat("host=", dir_, " port=", port_, " dbname=", dbname, " user=postgres");
}

std::string PostgresServer::uri() const {
  return absl::StrCat("postgresql://postgres@/tessera?host=", dir_, "&port=", port_);
}

}  // namespace tessera::jobs::testing
