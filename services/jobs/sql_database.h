// The few SQL operations the durable job store needs, behind one interface
// with two backends: SQLite (embedded, WAL; the default under --state-dir) and
// PostgreSQL (libpq; for schedulers that run as several replicas). The store's
// SQL is written once (job_store_sql.cc) in the dialect both accept; the
// backend translates placeholders ('?' -> $1, $2, ... for PostgreSQL) and
// supplies the few clauses that differ (SqlDialect).
#ifndef TESSERA_SERVICES_JOBS_SQL_DATABASE_H_
#define TESSERA_SERVICES_JOBS_SQL_DATABASE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tessera::jobs {

// A parameter or a column value. Blobs are bytes (serialized protobufs).
struct SqlBlob {
  std::string bytes;
};
using SqlValue = std::variant<std::monostate, int64_t, double, std::string, SqlBlob>;

struct SqlRow {
  std::vector<SqlValue> values;
  int64_t Int(size_t i) const;          // 0 for NULL; text is parsed
  double Double(size_t i) const;
  std::string Text(size_t i) const;     // "" for NULL
  std::string Blob(size_t i) const;     // bytes of a blob (or text) column
};

struct SqlDialect {
  std::string name;                     // "sqlite" or "postgresql"
  std::string blob_type;                // "BLOB" / "BYTEA"
  std::string begin_write;              // "BEGIN IMMEDIATE" / "BEGIN"
  // Appended to the claim query's SELECT to lock the chosen row and skip
  // rows other replicas hold: "" / " FOR UPDATE SKIP LOCKED".
  std::string lock_for_claim;
};

class SqlDatabase {
 public:
  virtual ~SqlDatabase() = default;
  virtual const SqlDialect& dialect() const = 0;
  // One statement with '?' placeholders; the result rows (none for writes).
  // Errors: UNAVAILABLE when the database cannot be reached, ABORTED for a
  // serialization failure or a unique-constraint violation (the caller may
  // retry), INTERNAL otherwise; the message names the database and the error.
  virtual absl::StatusOr<std::vector<SqlRow>> Query(const std::string& sql, const std::vector<SqlValue>& params = {}) = 0;
  // Runs `body` in one write transaction (dialect().begin_write ... COMMIT);
  // rolls back when it returns an error. Not re-entrant. Retries `body` a few
  // times on ABORTED (serialization failure, busy database).
  virtual absl::Status Transaction(const std::function<absl::Status()>& body) = 0;
  // Rows changed by the last write statement.
  virtual int64_t changes() = 0;
};

// SQLite database file at `path` (created when absent), WAL journal, NORMAL
// synchronous... FULL: every commit is on disk before it returns.
absl::StatusOr<std::unique_ptr<SqlDatabase>> OpenSqliteDatabase(const std::string& path);

// PostgreSQL through libpq; `conninfo` is a libpq connection string
// ("host=/tmp/pg port=5432 dbname=tessera user=postgres" or a postgresql:// URI).
absl::StatusOr<std::unique_ptr<SqlDatabase>> OpenPostgresDatabase(const std::string& conninfo);

// "sqlite:PATH" / "postgresql://..." / "postgres:CONNINFO" -> the database.
absl::StatusOr<std::unique_ptr<SqlDatabase>> OpenSqlDatabase(const std::string& url);

}  // namespace tessera::jobs

#endif  // TESSERA_SERVICES_JOBS_SQL_DATABASE_H_
