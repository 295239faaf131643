// SqlDatabase on PostgreSQL through libpq: one connection guarded by a mutex
// (the scheduler's store is small and its statements short), re-established
// once when it is found broken.
//
// Behaviour that makes PostgreSQL look like the SQLite backend to the store:
// - '?' placeholders become $1..$n (not inside quoted literals/identifiers or
//   comments); int64 goes as int8, double as float8, text untyped (the server
//   infers it), blobs as binary bytea. Results come back as text and are
//   decoded by column type: integers (and bool, and integral numeric such as
//   SUM(bigint)) -> int64, float -> double, bytea -> SqlBlob, NULL ->
//   monostate, anything else -> text.
// - Inside Transaction every statement runs under a savepoint, so a failing
//   statement (say a unique violation the body handles) leaves the
//   transaction usable, as in SQLite; without it PostgreSQL aborts the whole
//   transaction at the first error.
#include <postgresql/libpq-fe.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "services/jobs/sql_database.h"

namespace tessera::jobs {
namespace {

// Type OIDs (server/catalog/pg_type_d.h, stable across versions).
constexpr Oid kBoolOid = 16;
constexpr Oid kByteaOid = 17;
constexpr Oid kInt8Oid = 20;
constexpr Oid kInt2Oid = 21;
constexpr Oid kInt4Oid = 23;
constexpr Oid kOidOid = 26;
constexpr Oid kFloat4Oid = 700;
constexpr Oid kFloat8Oid = 701;
constexpr Oid kNumericOid = 1700;

constexpr int kTransactionAttempts = 5;

const SqlDialect& PostgresDialect() {
  static const SqlDialect* dialect = new SqlDialect{"postgresql", "BYTEA", "BEGIN", " FOR UPDATE SKIP LOCKED"};
  return *dialect;
}

// For error messages: the statement, shortened.
std::string Excerpt(const std::string& sql) {
  constexpr size_t kMax = 120;
  return sql.size() <= kMax ? sql : absl::StrCat(sql.substr(0, kMax), "...");
}

// libpq's messages end with a newline (and sometimes "ERROR:  " prefixes).
std::string Clean(const char* message) {
  if (message == nullptr) return "";
  return std::string(absl::StripAsciiWhitespace(message));
}

// Rewrites '?' to $1, $2, ... outside single-quoted literals, double-quoted
// identifiers and comments. Returns the number of placeholders in *count.
std::string TranslatePlaceholders(const std::string& sql, int* count) {
  std::string out;
  out.reserve(sql.size() + 16);
  *count = 0;
  size_t i = 0;
  const size_t n = sql.size();
  while (i < n) {
    const char c = sql[i];
    if (c == '\'' || c == '"') {
      // Up to the closing quote; a doubled quote is an escaped one and simply
      // closes and reopens the literal.
      const size_t end = sql.find(c, i + 1);
      const size_t stop = end == std::string::npos ? n : end + 1;
      out.append(sql, i, stop - i);
      i = stop;
    } else if (c == '-' && i + 1 < n && sql[i + 1] == '-') {
      const size_t end = sql.find('\n', i);
      const size_t stop = end == std::string::npos ? n : end;
      out.append(sql, i, stop - i);
      i = stop;
    } else if (c == '/' && i + 1 < n && sql[i + 1] == '*') {
      const size_t end = sql.find("*/", i + 2);
      const size_t stop = end == std::string::npos ? n : end + 2;
      out.append(sql, i, stop - i);
      i = stop;
    } else if (c == '?') {
      absl::StrAppend(&out, "$", ++*count);
      ++i;
    } else {
      out.push_back(c);
      ++i;
    }
  }
  return out;
}

// Result text of column `type` -> the SqlValue the store expects.
SqlValue Decode(Oid type, const char* text, int length) {
  switch (type) {
    case kInt8Oid:
    case kInt4Oid:
    case kInt2Oid:
    case kOidOid: {
      int64_t v = 0;
      if (absl::SimpleAtoi(absl::string_view(text, length), &v)) return v;
      return std::string(text, length);
    }
    case kBoolOid:
      return int64_t{length > 0 && text[0] == 't' ? 1 : 0};
    case kFloat4Oid:
    case kFloat8Oid: {
      double v = 0;
      if (absl::SimpleAtod(absl::string_view(text, length), &v)) return v;
      return std::string(text, length);
    }
    case kNumericOid: {
      // SUM(bigint) and friends are numeric: integral values as int64 (what
      // SQLite returns), others as double.
      int64_t i = 0;
      if (absl::SimpleAtoi(absl::string_view(text, length), &i)) return i;
      double d = 0;
      if (absl::SimpleAtod(absl::string_view(text, length), &d)) return d;
      return std::string(text, length);
    }
    case kByteaOid: {
      size_t size = 0;
      unsigned char* bytes = PQunescapeBytea(reinterpret_cast<const unsigned char*>(text), &size);
      if (bytes == nullptr) return SqlBlob{};
      SqlBlob blob{std::string(reinterpret_cast<const char*>(bytes), size)};
      PQfreemem(bytes);
      return blob;
    }
    default:
      return std::string(text, length);
  }
}

struct ResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using Result = std::unique_ptr<PGresult, ResultDeleter>;

class PostgresDatabase : public SqlDatabase {
 public:
  explicit PostgresDatabase(PGconn* conn) : conn_(conn) { PQsetNoticeReceiver(conn_, OnNotice, this); }
  ~PostgresDatabase() override { PQfinish(conn_); }

  const SqlDialect& dialect() const override { return PostgresDialect(); }

  absl::StatusOr<std::vector<SqlRow>> Query(const std::string& sql, const std::vector<SqlValue>& params) override {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    if (!in_transaction_) return Execute(sql, params);
    // Under a savepoint, so that an error undoes this statement only.
    absl::Status status = Simple("SAVEPOINT tessera_statement");
    if (!status.ok()) return status;
    absl::StatusOr<std::vector<SqlRow>> rows = Execute(sql, params);
    if (rows.ok()) {
      status = Simple("RELEASE SAVEPOINT tessera_statement");
      if (!status.ok()) return status;
    } else if (PQstatus(conn_) == CONNECTION_OK) {
      (void)Simple("ROLLBACK TO SAVEPOINT tessera_statement");
      (void)Simple("RELEASE SAVEPOINT tessera_statement");
    }
    return rows;
  }

  absl::Status Transaction(const std::function<absl::Status()>& body) override {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    if (in_transaction_) return absl::FailedPreconditionError("postgresql: Transaction is not re-entrant");
    absl::Status last;
    for (int attempt = 0; attempt < kTransactionAttempts; ++attempt) {
      if (attempt > 0) Backoff(attempt);
      last = Simple(dialect().begin_write);
      if (!last.ok()) {
        if (last.code() == absl::StatusCode::kAborted) continue;
        return last;
      }
      // Stays set until COMMIT/ROLLBACK: a connection lost meanwhile must
      // not be re-established silently (the rest would run outside).
      in_transaction_ = true;
      last = body();
      if (last.ok()) {
        last = Simple("COMMIT");
        // COMMIT of a transaction that failed answers "ROLLBACK", not an
        // error (the savepoints should make this impossible).
        if (last.ok() && last_command_ == "ROLLBACK") {
          last = absl::AbortedError("postgresql: the transaction was rolled back by the server");
        }
        if (last.ok()) {
          in_transaction_ = false;
          return last;
        }
      }
      if (PQstatus(conn_) == CONNECTION_OK && PQtransactionStatus(conn_) != PQTRANS_IDLE) {
        (void)Simple("ROLLBACK");
      }
      in_transaction_ = false;
      if (last.code() != absl::StatusCode::kAborted) return last;
    }
    return last;
  }

  int64_t changes() override {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    return changes_;
  }

 private:
  // Between retries of a transaction: a few milliseconds, growing, jittered,
  // so that two replicas that collided do not collide again.
  void Backoff(int attempt) {
    std::uniform_int_distribution<int> jitter(0, 1000 << attempt);
    std::this_thread::sleep_for(std::chrono::microseconds(1000 * (1 << attempt) + jitter(rng_)));
  }

  // Notices (CREATE TABLE IF NOT EXISTS ... skipping) are dropped, except
  // the FATAL message a server sends before it closes an idle connection
  // (shutdown, idle timeout, pg_terminate_backend).
  static void OnNotice(void* self, const PGresult* notice) {
    const char* severity = PQresultErrorField(notice, PG_DIAG_SEVERITY_NONLOCALIZED);
    if (severity != nullptr && (std::strcmp(severity, "FATAL") == 0 || std::strcmp(severity, "PANIC") == 0)) {
      static_cast<PostgresDatabase*>(self)->server_closing_ = true;
    }
  }

  // Before a statement outside a transaction: notices a connection the server
  // closed meanwhile and re-establishes it once. Inside a transaction a lost
  // connection is the transaction's error (reconnecting would run the rest
  // outside it).
  absl::Status EnsureConnected() {
    if (!in_transaction_ && PQstatus(conn_) == CONNECTION_OK) {
      // Reads and parses whatever the server sent while we were idle (its
      // FATAL goodbye, end of file: libpq then marks the connection bad).
      for (int i = 0; i < 3 && PQstatus(conn_) == CONNECTION_OK; ++i) {
        if (!PQconsumeInput(conn_)) break;
      }
      if (PQstatus(conn_) == CONNECTION_OK) (void)PQisBusy(conn_);
    }
    if (PQstatus(conn_) == CONNECTION_OK && !(server_closing_ && !in_transaction_)) return absl::OkStatus();
    if (!in_transaction_) {
      server_closing_ = false;
      PQreset(conn_);
      if (PQstatus(conn_) == CONNECTION_OK) return absl::OkStatus();
    }
    return absl::UnavailableError(
        absl::StrCat("postgresql: the connection to the database is lost: ", Clean(PQerrorMessage(conn_))));
  }

  absl::Status Error(const PGresult* result, const std::string& sql) {
    const char* sqlstate = result != nullptr ? PQresultErrorField(result, PG_DIAG_SQLSTATE) : nullptr;
    const std::string state = sqlstate != nullptr ? sqlstate : "";
    std::string text;
    if (result != nullptr && PQresultErrorField(result, PG_DIAG_MESSAGE_PRIMARY) != nullptr) {
      text = PQresultErrorField(result, PG_DIAG_MESSAGE_PRIMARY);
      if (const char* detail = PQresultErrorField(result, PG_DIAG_MESSAGE_DETAIL)) absl::StrAppend(&text, " (", detail, ")");
    } else {
      text = Clean(result != nullptr ? PQresultErrorMessage(result) : PQerrorMessage(conn_));
      if (text.empty()) text = Clean(PQerrorMessage(conn_));
    }
    const std::string message = absl::StrCat("postgresql: ", text, state.empty() ? "" : absl::StrCat(" [SQLSTATE ", state, "]"),
                                             " (in: ", Excerpt(sql), ")");
    if (state == "40001" || state == "40P01" || state == "23505") return absl::AbortedError(message);
    // Class 08: connection exception; 57P01-57P03: the server is shutting
    // down or starting up; no state at all: libpq lost the connection.
    if (absl::StartsWith(state, "08") || state == "57P01" || state == "57P02" || state == "57P03" ||
        PQstatus(conn_) != CONNECTION_OK) {
      return absl::UnavailableError(message);
    }
    return absl::InternalError(message);
  }

  // A parameterless statement (BEGIN, COMMIT, SAVEPOINT...).
  absl::Status Simple(const std::string& sql) {
    absl::Status status = EnsureConnected();
    if (!status.ok()) return status;
    Result result(PQexec(conn_, sql.c_str()));
    const ExecStatusType s = result != nullptr ? PQresultStatus(result.get()) : PGRES_FATAL_ERROR;
    if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK) return Error(result.get(), sql);
    last_command_ = PQcmdStatus(result.get());
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<SqlRow>> Execute(const std::string& sql, const std::vector<SqlValue>& params) {
    int placeholders = 0;
    const std::string translated = TranslatePlaceholders(sql, &placeholders);
    if (placeholders != static_cast<int>(params.size())) {
      return absl::InternalError(absl::StrCat("postgresql: the statement has ", placeholders, " placeholders but ",
                                              params.size(), " parameters were given (in: ", Excerpt(sql), ")"));
    }
    absl::Status status = EnsureConnected();
    if (!status.ok()) return status;

    const size_t n = params.size();
    std::vector<std::string> text(n);
    std::vector<const char*> values(n, nullptr);
    std::vector<int> lengths(n, 0);
    std::vector<int> formats(n, 0);
    std::vector<Oid> types(n, 0);
    for (size_t i = 0; i < n; ++i) {
      const SqlValue& v = params[i];
      if (const int64_t* x = std::get_if<int64_t>(&v)) {
        text[i] = absl::StrCat(*x);
        types[i] = kInt8Oid;
      } else if (const double* d = std::get_if<double>(&v)) {
        char buffer[32];
        std::snprintf(buffer, sizeof(buffer), "%.17g", *d);  // round-trips every double
        text[i] = buffer;
        types[i] = kFloat8Oid;
      } else if (const std::string* s = std::get_if<std::string>(&v)) {
        text[i] = *s;  // untyped: the server infers it from the context
      } else if (const SqlBlob* b = std::get_if<SqlBlob>(&v)) {
        values[i] = b->bytes.data();
        lengths[i] = static_cast<int>(b->bytes.size());
        formats[i] = 1;
        types[i] = kByteaOid;
        continue;
      } else {
        continue;  // NULL
      }
      values[i] = text[i].c_str();
      lengths[i] = static_cast<int>(text[i].size());
    }
    Result result(PQexecParams(conn_, translated.c_str(), static_cast<int>(n), types.data(), values.data(),
                               lengths.data(), formats.data(), /*resultFormat=*/0));
    const ExecStatusType s = result != nullptr ? PQresultStatus(result.get()) : PGRES_FATAL_ERROR;
    if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK) return Error(result.get(), sql);

    last_command_ = PQcmdStatus(result.get());
    for (const char* write : {"INSERT ", "UPDATE ", "DELETE ", "MERGE "}) {
      if (absl::StartsWith(last_command_, write)) {
        int64_t count = 0;
        changes_ = absl::SimpleAtoi(PQcmdTuples(result.get()), &count) ? count : 0;
      }
    }

    std::vector<SqlRow> rows;
    if (s != PGRES_TUPLES_OK) return rows;
    const int nrows = PQntuples(result.get());
    const int ncols = PQnfields(result.get());
    rows.resize(nrows);
    for (int r = 0; r < nrows; ++r) {
      rows[r].values.reserve(ncols);
      for (int c = 0; c < ncols; ++c) {
        if (PQgetisnull(result.get(), r, c)) {
          rows[r].values.emplace_back(std::monostate{});
        } else {
          rows[r].values.push_back(
              Decode(PQftype(result.get(), c), PQgetvalue(result.get(), r, c), PQgetlength(result.get(), r, c)));
        }
      }
    }
    return rows;
  }

  std::recursive_mutex mu_;
  PGconn* conn_;
  bool in_transaction_ = false;
  bool server_closing_ = false;  // the server said FATAL: reconnect before the next statement
  int64_t changes_ = 0;
  std::string last_command_;
  std::minstd_rand rng_{std::random_device{}()};
};

}  // namespace

absl::StatusOr<std::unique_ptr<SqlDatabase>> OpenPostgresDatabase(const std::string& conninfo) {
  // `conninfo` (a key=value string or a URI) is expanded in place of dbname;
  // what follows it overrides it: text is UTF-8 both ways.
  const char* keywords[] = {"connect_timeout", "fallback_application_name", "dbname", "client_encoding", nullptr};
  const char* values[] = {"10", "tessera", conninfo.c_str(), "UTF8", nullptr};
  PGconn* conn = PQconnectdbParams(keywords, values, /*expand_dbname=*/1);
  if (conn == nullptr) return absl::ResourceExhaustedError("postgresql: out of memory opening a connection");
  if (PQstatus(conn) != CONNECTION_OK) {
    const std::string message = Clean(PQerrorMessage(conn));
    PQfinish(conn);
    return absl::UnavailableError(absl::StrCat("postgresql: cannot connect to the job database: ", message));
  }
  return std::unique_ptr<SqlDatabase>(std::make_unique<PostgresDatabase>(conn));
}

}  // namespace tessera::jobs
