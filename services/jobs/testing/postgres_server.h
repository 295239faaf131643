// A throwaway PostgreSQL server for tests: a fresh cluster in a temporary
// directory under /tmp, reachable only through a unix socket in that
// directory (no TCP), with trust authentication, fsync off, and a database
// "tessera". Stopped (immediately) and deleted by the destructor.
//
// Needs Debian's server binaries (package postgresql: initdb and pg_ctl under
// /usr/lib/postgresql/<version>/bin). As root, the cluster belongs to the
// `postgres` user and the binaries run through `runuser -u postgres --`
// (initdb refuses root); any other user runs them as itself.
//
//   absl::StatusOr<std::unique_ptr<PostgresServer>> pg = PostgresServer::Start();
//   if (!pg.ok()) GTEST_SKIP() << pg.status();   // FAILED_PRECONDITION: why not
//   auto db = OpenPostgresDatabase((*pg)->conninfo());
#ifndef TESSERA_SERVICES_JOBS_TESTING_POSTGRES_SERVER_H_
#define TESSERA_SERVICES_JOBS_TESTING_POSTGRES_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace tessera::jobs::testing {

class PostgresServer {
 public:
  // FAILED_PRECONDITION (with the reason) when this machine cannot run a
  // server: no binaries, root without a `postgres` user or runuser, initdb
  // or pg_ctl failing (the message has the tail of their output).
  static absl::StatusOr<std::unique_ptr<PostgresServer>> Start();
  ~PostgresServer();

  PostgresServer(const PostgresServer&) = delete;
  PostgresServer& operator=(const PostgresServer&) = delete;

  // "host=<dir> port=<port> dbname=tessera user=postgres".
  std::string conninfo() const;
  // The same for another database of this server (e.g. "postgres").
  std::string conninfo(const std::string& dbname) const;
  // "postgresql://postgres@/tessera?host=<dir>&port=<port>".
  std::string uri() const;
  const std::string& dir() const { return dir_; }
  int port() const { return port_; }
  // SELECT version(), e.g. "PostgreSQL 15.10 (Debian 15.10-0+deb12u1) on ...".
  const std::string& version() const { return version_; }

 private:
  PostgresServer() = default;
  void Stop();

  std::string bin_dir_;
  std::string dir_;        // the temporary directory: socket, log, data/
  int port_ = 0;
  bool as_postgres_ = false;  // running as root: through runuser -u postgres
  bool running_ = false;
  std::string version_;
};

}  // namespace tessera::jobs::testing

#endif  // TESSERA_SERVICES_JOBS_TESTING_POSTGRES_SERVER_H_
