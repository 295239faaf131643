// SqlDatabase on SQLite: one connection, WAL journal, synchronous=FULL (a
// commit is on disk before it returns: the scheduler acknowledges a job only
// once it is durable), busy timeout for the WAL's short write locks.
#include <sqlite3.h>

#include <mutex>

#include "absl/strings/str_cat.h"
#include "services/jobs/sql_database.h"

namespace tessera::jobs {
namespace {

const SqlDialect& SqliteDialect() {
  static const SqlDialect* dialect = new SqlDialect{"sqlite", "BLOB", "BEGIN IMMEDIATE", ""};
  return *dialect;
}

class SqliteDatabase : public SqlDatabase {
 public:
  SqliteDatabase(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  ~SqliteDatabase() override { sqlite3_close_v2(db_); }

  const SqlDialect& dialect() const override { return SqliteDialect(); }

  absl::StatusOr<std::vector<SqlRow>> Query(const std::string& sql, const std::vector<SqlValue>& params) override {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    return QueryLocked(sql, params);
  }

  absl::Status Transaction(const std::function<absl::Status()>& body) override {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    absl::Status last;
    for (int attempt = 0; attempt < 5; ++attempt) {
      absl::StatusOr<std::vector<SqlRow>> begin = QueryLocked(dialect().begin_write, {});
      if (!begin.ok()) {
        last = begin.status();
        if (last.code() == absl::StatusCode::kAborted) continue;
        return last;
      }
      last = body();
      if (last.ok()) {
        absl::StatusOr<std::vector<SqlRow>> commit = QueryLocked("COMMIT", {});
        if (commit.ok()) return absl::OkStatus();
        last = commit.status();
      }
      (void)QueryLocked("ROLLBACK", {});
      if (last.code() != absl::StatusCode::kAborted) return last;
    }
    return last;
  }

  int64_t changes() override {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    return sqlite3_changes(db_);
  }

 private:
  absl::Status Error(int rc, const std::string& sql) const {
    const std::string message = absl::StrCat("sqlite '", path_, "': ", sqlite3_errmsg(db_), " (in: ", sql.substr(0, 80), ")");
    const int primary = rc & 0xff;
    if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED) return absl::AbortedError(message);
    if (primary == SQLITE_CONSTRAINT) return absl::AbortedError(message);
    if (primary == SQLITE_CANTOPEN || primary == SQLITE_IOERR || primary == SQLITE_FULL) {
      return absl::UnavailableError(message);
    }
    return absl::InternalError(message);
  }

  absl::StatusOr<std::vector<SqlRow>> QueryLocked(const std::string& sql, const std::vector<SqlValue>& params) {
    sqlite3_stmt* stmt = nullptr;
    int rc = sqlite3_prepare_v2(db_, sql.c_str(), static_cast<int>(sql.size()), &stmt, nullptr);
    if (rc != SQLITE_OK) return Error(rc, sql);
    std::unique_ptr<sqlite3_stmt, int (*)(sqlite3_stmt*)> guard(stmt, sqlite3_finalize);
    for (size_t i = 0; i < params.size(); ++i) {
      const int index = static_cast<int>(i) + 1;
      const SqlValue& v = params[i];
      if (std::holds_alternative<std::monostate>(v)) {
        rc = sqlite3_bind_null(stmt, index);
      } else if (const int64_t* x = std::get_if<int64_t>(&v)) {
        rc = sqlite3_bind_int64(stmt, index, *x);
      } else if (const double* d = std::get_if<double>(&v)) {
        rc = sqlite3_bind_double(stmt, index, *d);
      } else if (const std::string* s = std::get_if<std::string>(&v)) {
        rc = sqlite3_bind_text64(stmt, index, s->data(), s->size(), SQLITE_TRANSIENT, SQLITE_UTF8);
      } else {
        const std::string& b = std::get<SqlBlob>(v).bytes;
        rc = sqlite3_bind_blob64(stmt, index, b.data(), b.size(), SQLITE_TRANSIENT);
      }
      if (rc != SQLITE_OK) return Error(rc, sql);
    }
    std::vector<SqlRow> rows;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
      SqlRow row;
      const int n = sqlite3_column_count(stmt);
      for (int c = 0; c < n; ++c) {
        switch (sqlite3_column_type(stmt, c)) {
          case SQLITE_INTEGER:
            row.values.emplace_back(static_cast<int64_t>(sqlite3_column_int64(stmt, c)));
            break;
          case SQLITE_FLOAT:
            row.values.emplace_back(sqlite3_column_double(stmt, c));
            break;
          case SQLITE_TEXT:
            row.values.emplace_back(std::string(reinterpret_cast<const char*>(sqlite3_column_text(stmt, c)),
                                                sqlite3_column_bytes(stmt, c)));
            break;
          case SQLITE_BLOB: {
            const void* p = sqlite3_column_blob(stmt, c);
            const int size = sqlite3_column_bytes(stmt, c);
            row.values.emplace_back(SqlBlob{p == nullptr ? std::string() : std::string(static_cast<const char*>(p), size)});
            break;
          }
          default:
            row.values.emplace_back(std::monostate{});
        }
      }
      rows.push_back(std::move(row));
    }
    if (rc != SQLITE_DONE) return Error(rc, sql);
    return rows;
  }

  std::recursive_mutex mu_;
  sqlite3* db_;
  const std::string path_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<SqlDatabase>> OpenSqliteDatabase(const std::string& path) {
  sqlite3* db = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &db,
                                 SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    const std::string message = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close_v2(db);
    return absl::UnavailableError(absl::StrCat("cannot open the job database '", path, "': ", message));
  }
  sqlite3_busy_timeout(db, 5000);
  auto out = std::make_unique<SqliteDatabase>(db, path);
  for (const char* pragma : {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL", "PRAGMA foreign_keys=ON"}) {
    absl::StatusOr<std::vector<SqlRow>> r = out->Query(pragma, {});
    if (!r.ok()) return r.status();
  }
  return std::unique_ptr<SqlDatabase>(std::move(out));
}

}  // namespace tessera::jobs
