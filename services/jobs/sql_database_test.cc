// The SqlDatabase contract, run on both backends: SQLite on a temporary file
// and PostgreSQL on a throwaway server (PostgresServer; its cases are skipped
// with the reason where none can be started, or fail with
// TESSERA_REQUIRE_POSTGRES=1). PostgresOnly covers what only a server has:
// two connections claiming rows with FOR UPDATE SKIP LOCKED, deadlock retries,
// reconnection.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <limits>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/jobs/sql_database.h"
#include "services/jobs/testing/postgres_server.h"

namespace tessera::jobs {
namespace {

using ::testing::HasSubstr;
using ::tessera::jobs::testing::PostgresServer;

// One server for the whole binary (starting one takes about a second).
class PostgresEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<std::unique_ptr<PostgresServer>> server = PostgresServer::Start();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (server.ok()) {
      server_ = *std::move(server);
      std::cout << "PostgreSQL test server: " << server_->version() << " (socket in " << server_->dir()
                << ", port " << server_->port() << ", started in " << seconds << " s)" << std::endl;
    } else {
      status_ = server.status();
      std::cout << "no PostgreSQL test server: " << status_ << std::endl;
    }
  }
  void TearDown() override { server_.reset(); }

  PostgresServer* server() const { return server_.get(); }
  const absl::Status& status() const { return status_; }

 private:
  std::unique_ptr<PostgresServer> server_;
  absl::Status status_;
};

PostgresEnvironment* const postgres_env =
    static_cast<PostgresEnvironment*>(::testing::AddGlobalTestEnvironment(new PostgresEnvironment));

bool PostgresRequired() {
  const char* v = std::getenv("TESSERA_REQUIRE_POSTGRES");
  return v != nullptr && *v != '\0' && std::string(v) != "0";
}

#define SKIP_WITHOUT_POSTGRES()                                                      \
  do {                                                                               \
    if (postgres_env->server() == nullptr) {                                         \
      if (PostgresRequired()) FAIL() << "no PostgreSQL: " << postgres_env->status(); \
      GTEST_SKIP() << "no PostgreSQL: " << postgres_env->status();                   \
    }                                                                                \
  } while (0)

// An empty `public` schema for the next test.
void ResetPostgres() {
  absl::StatusOr<std::unique_ptr<SqlDatabase>> admin = OpenPostgresDatabase(postgres_env->server()->conninfo());
  ASSERT_TRUE(admin.ok()) << admin.status();
  for (const char* sql : {"DROP SCHEMA IF EXISTS public CASCADE", "CREATE SCHEMA public"}) {
    absl::StatusOr<std::vector<SqlRow>> r = (*admin)->Query(sql);
    ASSERT_TRUE(r.ok()) << r.status();
  }
}

std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

std::vector<SqlRow> MustQuery(SqlDatabase& db, const std::string& sql, const std::vector<SqlValue>& params = {}) {
  absl::StatusOr<std::vector<SqlRow>> rows = db.Query(sql, params);
  EXPECT_TRUE(rows.ok()) << rows.status();
  return rows.ok() ? *std::move(rows) : std::vector<SqlRow>();
}

int64_t Count(SqlDatabase& db, const std::string& table) {
  std::vector<SqlRow> rows = MustQuery(db, absl::StrCat("SELECT COUNT(*) FROM ", table));
  return rows.empty() ? -1 : rows[0].Int(0);
}

std::string AllBytes() {
  std::string bytes;
  for (int i = 0; i < 256; ++i) bytes.push_back(static_cast<char>(i));
  return bytes;
}

std::string RandomBytes(size_t n) {
  std::mt19937 rng(42);
  std::string bytes(n, '\0');
  for (char& c : bytes) c = static_cast<char>(rng() & 0xff);
  return bytes;
}

std::string Lower(const std::string& s) { return absl::AsciiStrToLower(s); }

enum class Backend { kSqlite, kPostgres };

class SqlDatabaseTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    if (GetParam() == Backend::kPostgres) {
      SKIP_WITHOUT_POSTGRES();
      ResetPostgres();
    } else {
      static std::atomic<int> counter{0};
      path_ = absl::StrCat(TempDir(), "/sql_database_test_", getpid(), "_", counter++, ".db");
    }
    absl::StatusOr<std::unique_ptr<SqlDatabase>> db = Open();
    ASSERT_TRUE(db.ok()) << db.status();
    db_ = *std::move(db);
  }

  void TearDown() override {
    db_.reset();
    if (!path_.empty()) {
      for (const char* suffix : {"", "-wal", "-shm"}) std::remove((path_ + suffix).c_str());
    }
  }

  // Another connection to the same database.
  absl::StatusOr<std::unique_ptr<SqlDatabase>> Open() {
    if (GetParam() == Backend::kPostgres) return OpenPostgresDatabase(postgres_env->server()->conninfo());
    return OpenSqliteDatabase(path_);
  }

  bool postgres() const { return GetParam() == Backend::kPostgres; }
  SqlDatabase& db() { return *db_; }

  void CreateValues() {
    MustQuery(db(), absl::StrCat("CREATE TABLE v (id BIGINT PRIMARY KEY, i BIGINT, d DOUBLE PRECISION, t TEXT, b ",
                                 db().dialect().blob_type, ")"));
  }

  std::string path_;
  std::unique_ptr<SqlDatabase> db_;
};

TEST_P(SqlDatabaseTest, Dialect) {
  const SqlDialect& d = db().dialect();
  if (postgres()) {
    EXPECT_EQ(d.name, "postgresql");
    EXPECT_EQ(d.blob_type, "BYTEA");
    EXPECT_EQ(d.lock_for_claim, " FOR UPDATE SKIP LOCKED");
    EXPECT_TRUE(absl::StartsWith(d.begin_write, "BEGIN")) << d.begin_write;
  } else {
    EXPECT_EQ(d.name, "sqlite");
    EXPECT_EQ(d.blob_type, "BLOB");
    EXPECT_EQ(d.lock_for_claim, "");
  }
}

TEST_P(SqlDatabaseTest, IntegersRoundTrip) {
  CreateValues();
  const std::vector<int64_t> ints = {0,
                                     1,
                                     -1,
                                     int64_t{1} << 31,
                                     -(int64_t{1} << 31) - 1,
                                     (int64_t{1} << 40) + 7,
                                     -(int64_t{1} << 53) - 3,
                                     std::numeric_limits<int64_t>::max(),
                                     std::numeric_limits<int64_t>::min()};
  for (size_t k = 0; k < ints.size(); ++k) {
    MustQuery(db(), "INSERT INTO v (id, i) VALUES (?, ?)", {static_cast<int64_t>(k), ints[k]});
  }
  std::vector<SqlRow> rows = MustQuery(db(), "SELECT id, i FROM v ORDER BY id");
  ASSERT_EQ(rows.size(), ints.size());
  for (size_t k = 0; k < ints.size(); ++k) {
    ASSERT_TRUE(std::holds_alternative<int64_t>(rows[k].values[1])) << k;
    EXPECT_EQ(std::get<int64_t>(rows[k].values[1]), ints[k]);
    EXPECT_EQ(rows[k].Int(1), ints[k]);
  }
  // Compared and filtered as 64-bit integers on the server.
  rows = MustQuery(db(), "SELECT COUNT(*) FROM v WHERE i > ?", {int64_t{1} << 31});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].Int(0), 2);  // 2^40 + 7 and max
  rows = MustQuery(db(), "SELECT SUM(i) FROM v WHERE i BETWEEN ? AND ?", {int64_t{-5}, (int64_t{1} << 41)});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].Int(0), (int64_t{1} << 31) + (int64_t{1} << 40) + 7);
  EXPECT_TRUE(std::holds_alternative<int64_t>(rows[0].values[0]));
  rows = MustQuery(db(), "SELECT id FROM v WHERE i = ?", {std::numeric_limits<int64_t>::min()});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].Int(0), 8);
}

TEST_P(SqlDatabaseTest, DoublesRoundTrip) {
  CreateValues();
  const std::vector<double> doubles = {0.0, 0.1, -2.5e-300, 1e300, 3.141592653589793, -1.0 / 3.0, 123456789.125};
  for (size_t k = 0; k < doubles.size(); ++k) {
    MustQuery(db(), "INSERT INTO v (id, d) VALUES (?, ?)", {static_cast<int64_t>(k), doubles[k]});
  }
  std::vector<SqlRow> rows = MustQuery(db(), "SELECT d FROM v ORDER BY id");
  ASSERT_EQ(rows.size(), doubles.size());
  for (size_t k = 0; k < doubles.size(); ++k) {
    ASSERT_TRUE(std::holds_alternative<double>(rows[k].values[0])) << k;
    EXPECT_EQ(std::get<double>(rows[k].values[0]), doubles[k]);  // exact
    EXPECT_EQ(rows[k].Double(0), doubles[k]);
  }
}

TEST_P(SqlDatabaseTest, TextRoundTrips) {
  CreateValues();
  const std::vector<std::string> texts = {"",
                                          "plain",
                                          "it's \"quoted\" 'twice''",
                                          "back\\slash \\x00 $1 ? ?? %s",
                                          "Zürich — 東京 — Ελλάδα — 🎉",
                                          "line\nbreak\ttab",
                                          std::string(100000, 'x')};
  for (size_t k = 0; k < texts.size(); ++k) {
    MustQuery(db(), "INSERT INTO v (id, t) VALUES (?, ?)", {static_cast<int64_t>(k), texts[k]});
  }
  std::vector<SqlRow> rows = MustQuery(db(), "SELECT t FROM v ORDER BY id");
  ASSERT_EQ(rows.size(), texts.size());
  for (size_t k = 0; k < texts.size(); ++k) {
    ASSERT_TRUE(std::holds_alternative<std::string>(rows[k].values[0])) << k;
    EXPECT_EQ(rows[k].Text(0), texts[k]);
  }
  rows = MustQuery(db(), "SELECT id FROM v WHERE t = ?", {texts[4]});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].Int(0), 4);
}

TEST_P(SqlDatabaseTest, BlobsRoundTrip) {
  CreateValues();
  const std::vector<std::string> blobs = {std::string(),
                                          std::string("\0", 1),
                                          std::string("\0\0\x01\0\xff\0", 6),
                                          AllBytes(),
                                          "\\x41 not hex",
                                          RandomBytes(1 << 20)};
  for (size_t k = 0; k < blobs.size(); ++k) {
    MustQuery(db(), "INSERT INTO v (id, b) VALUES (?, ?)", {static_cast<int64_t>(k), SqlBlob{blobs[k]}});
  }
  std::vector<SqlRow> rows = MustQuery(db(), "SELECT id, b FROM v ORDER BY id");
  ASSERT_EQ(rows.size(), blobs.size());
  for (size_t k = 0; k < blobs.size(); ++k) {
    ASSERT_TRUE(std::holds_alternative<SqlBlob>(rows[k].values[1])) << k;
    EXPECT_EQ(std::get<SqlBlob>(rows[k].values[1]).bytes, blobs[k]) << k;
    EXPECT_EQ(rows[k].Blob(1), blobs[k]) << k;
  }
  // A blob parameter in a WHERE clause compares bytes.
  rows = MustQuery(db(), "SELECT id FROM v WHERE b = ?", {SqlBlob{AllBytes()}});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].Int(0), 3);
  // Updated in place.
  MustQuery(db(), "UPDATE v SET b = ? WHERE id = ?", {SqlBlob{std::string("\0z", 2)}, int64_t{0}});
  rows = MustQuery(db(), "SELECT b FROM v WHERE id = 0");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].Blob(0), std::string("\0z", 2));
}

TEST_P(SqlDatabaseTest, Nulls) {
  CreateValues();
  MustQuery(db(), "INSERT INTO v (id, i, d, t, b) VALUES (?, ?, ?, ?, ?)",
            {int64_t{1}, std::monostate{}, std::monostate{}, std::monostate{}, std::monostate{}});
  MustQuery(db(), "INSERT INTO v (id) VALUES (2)");
  std::vector<SqlRow> rows = MustQuery(db(), "SELECT i, d, t, b FROM v ORDER BY id");
  ASSERT_EQ(rows.size(), 2u);
  for (const SqlRow& row : rows) {
    ASSERT_EQ(row.values.size(), 4u);
    for (const SqlValue& v : row.values) EXPECT_TRUE(std::holds_alternative<std::monostate>(v));
    EXPECT_EQ(row.Int(0), 0);
    EXPECT_EQ(row.Double(1), 0.0);
    EXPECT_EQ(row.Text(2), "");
    EXPECT_EQ(row.Blob(3), "");
  }
  EXPECT_EQ(MustQuery(db(), "SELECT id FROM v WHERE t IS NULL").size(), 2u);
}

TEST_P(SqlDatabaseTest, QuestionMarksInLiteralsAreNotPlaceholders) {
  CreateValues();
  MustQuery(db(), "INSERT INTO v (id, t) VALUES (?, 'what? it''s ?')", {int64_t{1}});
  MustQuery(db(), "INSERT INTO v (id, t) VALUES (?, ?) -- a comment?", {int64_t{2}, std::string("?")});
  std::vector<SqlRow> rows = MustQuery(db(), "SELECT t FROM v ORDER BY id");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].Text(0), "what? it's ?");
  EXPECT_EQ(rows[1].Text(0), "?");
  rows = MustQuery(db(), "SELECT 'a?', ?, '?''?', ? /* ? */", {int64_t{7}, std::string("x")});
  ASSERT_EQ(rows.size(), 1u);
  ASSERT_EQ(rows[0].values.size(), 4u);
  EXPECT_EQ(rows[0].Text(0), "a?");
  EXPECT_EQ(rows[0].Int(1), 7);
  EXPECT_EQ(rows[0].Text(2), "?'?");
  EXPECT_EQ(rows[0].Text(3), "x");
  // More parameters than placeholders is an error, not silently ignored.
  EXPECT_FALSE(db().Query("SELECT ?", {int64_t{1}, int64_t{2}}).ok());
}

TEST_P(SqlDatabaseTest, ChangesCountsTheLastWrite) {
  CreateValues();
  for (int64_t id = 1; id <= 3; ++id) {
    MustQuery(db(), "INSERT INTO v (id, i) VALUES (?, ?)", {id, id * 10});
    EXPECT_EQ(db().changes(), 1);
  }
  MustQuery(db(), "UPDATE v SET i = i + 1 WHERE id >= ?", {int64_t{2}});
  EXPECT_EQ(db().changes(), 2);
  MustQuery(db(), "SELECT * FROM v");  // reads do not count
  EXPECT_EQ(db().changes(), 2);
  MustQuery(db(), "UPDATE v SET i = 0 WHERE id = ?", {int64_t{99}});
  EXPECT_EQ(db().changes(), 0);
  // A conditional update (how the store detects a lost race) inside a transaction.
  ASSERT_TRUE(db().Transaction([&]() -> absl::Status {
                    MustQuery(db(), "UPDATE v SET i = 5 WHERE id = ? AND i = ?", {int64_t{3}, int64_t{31}});
                    EXPECT_EQ(db().changes(), 1);
                    return absl::OkStatus();
                  }).ok());
  EXPECT_EQ(db().changes(), 1);  // COMMIT is not a write
  MustQuery(db(), "DELETE FROM v");
  EXPECT_EQ(db().changes(), 3);
}

TEST_P(SqlDatabaseTest, TransactionCommits) {
  CreateValues();
  absl::Status status = db().Transaction([&]() -> absl::Status {
    for (int64_t id = 1; id <= 2; ++id) {
      absl::StatusOr<std::vector<SqlRow>> r = db().Query("INSERT INTO v (id, t) VALUES (?, 'x')", {id});
      if (!r.ok()) return r.status();
    }
    return absl::OkStatus();
  });
  ASSERT_TRUE(status.ok()) << status;
  absl::StatusOr<std::unique_ptr<SqlDatabase>> other = Open();
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(Count(**other, "v"), 2);  // committed: another connection sees it
}

TEST_P(SqlDatabaseTest, TransactionRollsBackOnError) {
  CreateValues();
  MustQuery(db(), "INSERT INTO v (id, t) VALUES (1, 'before')");
  int calls = 0;
  absl::Status status = db().Transaction([&]() -> absl::Status {
    ++calls;
    MustQuery(db(), "INSERT INTO v (id, t) VALUES (2, 'inside')");
    MustQuery(db(), "UPDATE v SET t = 'changed' WHERE id = 1");
    return absl::InvalidArgumentError("the body gives up");
  });
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_EQ(calls, 1);  // only ABORTED is retried
  EXPECT_EQ(Count(db(), "v"), 1);
  std::vector<SqlRow> rows = MustQuery(db(), "SELECT t FROM v WHERE id = 1");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].Text(0), "before");
  // The connection is usable afterwards, in and out of transactions.
  EXPECT_TRUE(db().Transaction([&] { return db().Query("INSERT INTO v (id) VALUES (3)").status(); }).ok());
  EXPECT_EQ(Count(db(), "v"), 2);
}

TEST_P(SqlDatabaseTest, TransactionRetriesAborted) {
  CreateValues();
  int calls = 0;
  absl::Status status = db().Transaction([&]() -> absl::Status {
    ++calls;
    MustQuery(db(), "INSERT INTO v (id) VALUES (?)", {int64_t{calls}});
    if (calls < 3) return absl::AbortedError("lost a race");
    return absl::OkStatus();
  });
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(calls, 3);
  std::vector<SqlRow> rows = MustQuery(db(), "SELECT id FROM v");
  ASSERT_EQ(rows.size(), 1u);  // the first two attempts were rolled back
  EXPECT_EQ(rows[0].Int(0), 3);

  calls = 0;
  status = db().Transaction([&]() -> absl::Status {
    ++calls;
    return absl::AbortedError("always");
  });
  EXPECT_EQ(status.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(calls, 5);
}

TEST_P(SqlDatabaseTest, UniqueViolationIsAborted) {
  CreateValues();
  MustQuery(db(), "INSERT INTO v (id, t) VALUES (1, 'first')");
  absl::StatusOr<std::vector<SqlRow>> r = db().Query("INSERT INTO v (id, t) VALUES (?, ?)", {int64_t{1}, std::string("again")});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kAborted) << r.status();
  EXPECT_THAT(Lower(std::string(r.status().message())), HasSubstr(db().dialect().name));
  EXPECT_THAT(Lower(std::string(r.status().message())), HasSubstr("unique"));

  // Inside a transaction the failed statement alone is undone: the body may
  // handle the error and go on (SQLite's behaviour; PostgreSQL's through a
  // savepoint per statement).
  absl::Status status = db().Transaction([&]() -> absl::Status {
    absl::StatusOr<std::vector<SqlRow>> dup = db().Query("INSERT INTO v (id, t) VALUES (1, 'dup')");
    EXPECT_EQ(dup.status().code(), absl::StatusCode::kAborted);
    return db().Query("INSERT INTO v (id, t) VALUES (2, 'second')").status();
  });
  ASSERT_TRUE(status.ok()) << status;
  std::vector<SqlRow> rows = MustQuery(db(), "SELECT t FROM v ORDER BY id");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].Text(0), "first");
  EXPECT_EQ(rows[1].Text(0), "second");
}

TEST_P(SqlDatabaseTest, MalformedStatementIsInternal) {
  absl::StatusOr<std::vector<SqlRow>> r = db().Query("SELEC 1");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInternal) << r.status();
  EXPECT_THAT(Lower(std::string(r.status().message())), HasSubstr(db().dialect().name));
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("syntax error"));  // the server's text

  r = db().Query("SELECT * FROM no_such_table");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInternal) << r.status();
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("no_such_table"));
  EXPECT_TRUE(db().Query("SELECT 1").ok());  // still usable
}

TEST_P(SqlDatabaseTest, OneConnectionManyThreads) {
  CreateValues();
  MustQuery(db(), "INSERT INTO v (id, i) VALUES (1, 0)");
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int k = 0; k < 25; ++k) {
        absl::Status status = db().Transaction([&]() -> absl::Status {
          absl::StatusOr<std::vector<SqlRow>> r = db().Query("SELECT i FROM v WHERE id = 1");
          if (!r.ok()) return r.status();
          return db().Query("UPDATE v SET i = ? WHERE id = 1", {(*r)[0].Int(0) + 1}).status();
        });
        EXPECT_TRUE(status.ok()) << status;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  std::vector<SqlRow> rows = MustQuery(db(), "SELECT i FROM v WHERE id = 1");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].Int(0), 100);  // transactions of one connection do not interleave
}

TEST_P(SqlDatabaseTest, OpenSqlDatabaseUrls) {
  std::vector<std::string> urls;
  if (postgres()) {
    const PostgresServer& pg = *postgres_env->server();
    urls = {absl::StrCat("postgres:", pg.conninfo()), pg.uri(),
            absl::StrCat("postgres://postgres@/tessera?host=", pg.dir(), "&port=", pg.port())};
  } else {
    urls = {absl::StrCat("sqlite:", path_)};
  }
  MustQuery(db(), "CREATE TABLE marker (x BIGINT)");
  MustQuery(db(), "INSERT INTO marker (x) VALUES (42)");
  for (const std::string& url : urls) {
    absl::StatusOr<std::unique_ptr<SqlDatabase>> opened = OpenSqlDatabase(url);
    ASSERT_TRUE(opened.ok()) << url << ": " << opened.status();
    EXPECT_EQ((*opened)->dialect().name, db().dialect().name) << url;
    std::vector<SqlRow> rows = MustQuery(**opened, "SELECT x FROM marker");
    ASSERT_EQ(rows.size(), 1u) << url;
    EXPECT_EQ(rows[0].Int(0), 42) << url;
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, SqlDatabaseTest, ::testing::Values(Backend::kSqlite, Backend::kPostgres),
                         [](const ::testing::TestParamInfo<Backend>& info) {
                           return info.param == Backend::kSqlite ? "Sqlite" : "Postgres";
                         });

TEST(OpenSqlDatabaseTest, RejectsOtherUrls) {
  for (const std::string url : {"", "mysql://localhost/db", "/var/lib/tessera/jobs.db", "sqlite3:x.db", "pg:host=x"}) {
    absl::StatusOr<std::unique_ptr<SqlDatabase>> db = OpenSqlDatabase(url);
    ASSERT_FALSE(db.ok()) << url;
    EXPECT_EQ(db.status().code(), absl::StatusCode::kInvalidArgument) << url;
    const std::string message(db.status().message());
    EXPECT_THAT(message, HasSubstr("sqlite:PATH")) << url;
    EXPECT_THAT(message, HasSubstr("postgresql://")) << url;
    EXPECT_THAT(message, HasSubstr("postgres:CONNINFO")) << url;
  }
}

TEST(PostgresOnly, UnreachableServerIsUnavailable) {
  absl::StatusOr<std::unique_ptr<SqlDatabase>> db =
      OpenPostgresDatabase("host=/nonexistent-tessera-dir port=5 dbname=x user=x connect_timeout=2");
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.status().code(), absl::StatusCode::kUnavailable) << db.status();
  EXPECT_THAT(std::string(db.status().message()), HasSubstr("postgresql"));
  EXPECT_THAT(std::string(db.status().message()), HasSubstr("/nonexistent-tessera-dir"));  // libpq's text
}

class PostgresOnlyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_POSTGRES();
    ResetPostgres();
  }
  std::unique_ptr<SqlDatabase> Connect() {
    absl::StatusOr<std::unique_ptr<SqlDatabase>> db = OpenPostgresDatabase(postgres_env->server()->conninfo());
    EXPECT_TRUE(db.ok()) << db.status();
    return db.ok() ? *std::move(db) : nullptr;
  }
};

// How two scheduler replicas claim jobs: each in its own transaction selects
// the best QUEUED row with dialect().lock_for_claim; while the first holds
// its row, the second skips it and gets the next one instead of blocking or
// taking the same job.
TEST_F(PostgresOnlyTest, SkipLockedGivesConcurrentClaimsDifferentRows) {
  std::unique_ptr<SqlDatabase> a = Connect(), b = Connect();
  ASSERT_TRUE(a && b);
  MustQuery(*a, "CREATE TABLE jobs (id TEXT PRIMARY KEY, priority BIGINT NOT NULL, state TEXT NOT NULL, owner TEXT)");
  for (const auto& [id, priority] : std::vector<std::pair<std::string, int64_t>>{{"j1", 5}, {"j2", 9}, {"j3", 1}, {"j4", 7}}) {
    MustQuery(*a, "INSERT INTO jobs (id, priority, state) VALUES (?, ?, 'QUEUED')", {id, priority});
  }

  // Claims one job on `db` for `owner`; `between` runs after the SELECT has
  // locked the row and before the UPDATE.
  auto claim = [](SqlDatabase& db, const std::string& owner, const std::function<void()>& between) {
    std::string claimed;
    absl::Status status = db.Transaction([&]() -> absl::Status {
      claimed.clear();
      absl::StatusOr<std::vector<SqlRow>> rows = db.Query(
          absl::StrCat("SELECT id FROM jobs WHERE state = ? ORDER BY priority DESC, id LIMIT 1",
                       db.dialect().lock_for_claim),
          {std::string("QUEUED")});
      if (!rows.ok()) return rows.status();
      if (rows->empty()) return absl::OkStatus();
      claimed = (*rows)[0].Text(0);
      between();
      absl::StatusOr<std::vector<SqlRow>> r = db.Query(
          "UPDATE jobs SET state = 'RUNNING', owner = ? WHERE id = ? AND state = 'QUEUED'", {owner, claimed});
      if (!r.ok()) return r.status();
      if (db.changes() != 1) return absl::AbortedError("claimed by another replica");
      return absl::OkStatus();
    });
    EXPECT_TRUE(status.ok()) << owner << ": " << status;
    return claimed;
  };

  absl::Notification a_holds_row, b_done;
  std::string claimed_a;
  std::thread replica_a([&] {
    claimed_a = claim(*a, "A", [&] {
      if (!a_holds_row.HasBeenNotified()) a_holds_row.Notify();
      EXPECT_TRUE(b_done.WaitForNotificationWithTimeout(absl::Seconds(30)));
    });
  });
  ASSERT_TRUE(a_holds_row.WaitForNotificationWithTimeout(absl::Seconds(30)));
  // A's transaction is open and holds j2; B must not block on it.
  const auto start = std::chrono::steady_clock::now();
  const std::string claimed_b = claim(*b, "B", [] {});
  const double b_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  b_done.Notify();
  replica_a.join();

  EXPECT_EQ(claimed_a, "j2");  // highest priority
  EXPECT_EQ(claimed_b, "j4");  // the next one: j2 was locked
  EXPECT_LT(b_seconds, 5.0);
  std::vector<SqlRow> rows = MustQuery(*a, "SELECT id, owner FROM jobs WHERE state = 'RUNNING' ORDER BY id");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].Text(0), "j2");
  EXPECT_EQ(rows[0].Text(1), "A");
  EXPECT_EQ(rows[1].Text(0), "j4");
  EXPECT_EQ(rows[1].Text(1), "B");
  // And the next claims, now sequential, take what is left in order.
  EXPECT_EQ(claim(*b, "B", [] {}), "j1");
  EXPECT_EQ(claim(*a, "A", [] {}), "j3");
  EXPECT_EQ(claim(*a, "A", [] {}), "");
}

// Two transactions that lock two rows in opposite orders: the server breaks
// the deadlock by failing one (SQLSTATE 40P01 -> ABORTED); Transaction
// retries that one, and both end up applied.
TEST_F(PostgresOnlyTest, DeadlockIsAbortedAndRetried) {
  std::unique_ptr<SqlDatabase> a = Connect(), b = Connect();
  ASSERT_TRUE(a && b);
  MustQuery(*a, "CREATE TABLE counters (id BIGINT PRIMARY KEY, n BIGINT NOT NULL)");
  MustQuery(*a, "INSERT INTO counters (id, n) VALUES (1, 0), (2, 0)");
  for (SqlDatabase* db : {a.get(), b.get()}) MustQuery(*db, "SET deadlock_timeout = '100ms'");

  absl::Notification a_first, b_first;
  std::atomic<int> calls{0};
  std::vector<absl::Status> errors;  // what the bodies saw
  std::mutex errors_mu;
  auto body = [&](SqlDatabase& db, int64_t first, int64_t second, absl::Notification& mine,
                  absl::Notification& theirs) {
    return db.Transaction([&]() -> absl::Status {
      ++calls;
      for (int64_t id : {first, second}) {
        absl::StatusOr<std::vector<SqlRow>> r = db.Query("UPDATE counters SET n = n + 1 WHERE id = ?", {id});
        if (!r.ok()) {
          std::lock_guard<std::mutex> lock(errors_mu);
          errors.push_back(r.status());
          return r.status();
        }
        if (id == first) {
          if (!mine.HasBeenNotified()) mine.Notify();
          theirs.WaitForNotificationWithTimeout(absl::Seconds(30));
        }
      }
      return absl::OkStatus();
    });
  };
  absl::Status status_a, status_b;
  std::thread ta([&] { status_a = body(*a, 1, 2, a_first, b_first); });
  std::thread tb([&] { status_b = body(*b, 2, 1, b_first, a_first); });
  ta.join();
  tb.join();
  EXPECT_TRUE(status_a.ok()) << status_a;
  EXPECT_TRUE(status_b.ok()) << status_b;
  EXPECT_EQ(calls.load(), 3);  // one of them ran twice
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].code(), absl::StatusCode::kAborted) << errors[0];
  EXPECT_THAT(std::string(errors[0].message()), HasSubstr("deadlock"));
  std::vector<SqlRow> rows = MustQuery(*a, "SELECT n FROM counters ORDER BY id");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].Int(0), 2);
  EXPECT_EQ(rows[1].Int(0), 2);
}

// The server ends the connection while it is idle (a restart, an idle
// timeout, an administrator): the next statement reconnects.
TEST_F(PostgresOnlyTest, ReconnectsAfterTheServerClosedTheConnection) {
  std::unique_ptr<SqlDatabase> db = Connect(), admin = Connect();
  ASSERT_TRUE(db && admin);
  std::vector<SqlRow> rows = MustQuery(*db, "SELECT pg_backend_pid()");
  ASSERT_EQ(rows.size(), 1u);
  const int64_t pid = rows[0].Int(0);
  // int64 parameters are int8: functions taking int4 need a cast.
  rows = MustQuery(*admin, "SELECT pg_terminate_backend(CAST(? AS INTEGER))", {pid});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].Int(0), 1);  // bool true
  for (int i = 0; i < 100; ++i) {
    rows = MustQuery(*admin, "SELECT COUNT(*) FROM pg_stat_activity WHERE pid = ?", {pid});
    if (!rows.empty() && rows[0].Int(0) == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  absl::StatusOr<std::vector<SqlRow>> r = db->Query("SELECT pg_backend_pid()");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NE((*r)[0].Int(0), pid);  // a new backend
  EXPECT_TRUE(db->Transaction([&] { return db->Query("SELECT 1").status(); }).ok());
}

// Statements inside one transaction each get a savepoint; many of them in one
// transaction still work (and take a bounded time).
TEST_F(PostgresOnlyTest, ManyStatementsInOneTransaction) {
  std::unique_ptr<SqlDatabase> db = Connect();
  ASSERT_TRUE(db);
  MustQuery(*db, "CREATE TABLE t (id BIGINT PRIMARY KEY)");
  const auto start = std::chrono::steady_clock::now();
  absl::Status status = db->Transaction([&]() -> absl::Status {
    for (int64_t id = 0; id < 1000; ++id) {
      absl::Status s = db->Query("INSERT INTO t (id) VALUES (?)", {id}).status();
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(Count(*db, "t"), 1000);
  std::cout << "1000 INSERTs in one PostgreSQL transaction: " << seconds * 1000 << " ms" << std::endl;
}

}  // namespace
}  // namespace tessera::jobs
