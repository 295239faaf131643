#include "services/jobs/sql_database.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace tessera::jobs {

int64_t SqlRow::Int(size_t i) const {
  const SqlValue& v = values.at(i);
  if (const int64_t* x = std::get_if<int64_t>(&v)) return *x;
  if (const double* d = std::get_if<double>(&v)) return static_cast<int64_t>(*d);
  if (const std::string* s = std::get_if<std::string>(&v)) {
    int64_t out = 0;
    return absl::SimpleAtoi(*s, &out) ? out : 0;
  }
  return 0;
}

double SqlRow::Double(size_t i) const {
  const SqlValue& v = values.at(i);
  if (const double* d = std::get_if<double>(&v)) return *d;
  if (const int64_t* x = std::get_if<int64_t>(&v)) return static_cast<double>(*x);
  if (const std::string* s = std::get_if<std::string>(&v)) {
    double out = 0;
    return absl::SimpleAtod(*s, &out) ? out : 0;
  }
  return 0;
}

std::string SqlRow::Text(size_t i) const {
  const SqlValue& v = values.at(i);
  if (const std::string* s = std::get_if<std::string>(&v)) return *s;
  if (const SqlBlob* b = std::get_if<SqlBlob>(&v)) return b->bytes;
  if (const int64_t* x = std::get_if<int64_t>(&v)) return absl::StrCat(*x);
  if (const double* d = std::get_if<double>(&v)) return absl::StrCat(*d);
  return "";
}

std::string SqlRow::Blob(size_t i) const { return Text(i); }

absl::StatusOr<std::unique_ptr<SqlDatabase>> OpenSqlDatabase(const std::string& url) {
  if (absl::StartsWith(url, "sqlite:")) return OpenSqliteDatabase(url.substr(7));
  if (absl::StartsWith(url, "postgresql://") || absl::StartsWith(url, "postgres://")) return OpenPostgresDatabase(url);
  if (absl::StartsWith(url, "postgres:")) return OpenPostgresDatabase(url.substr(9));
  return absl::InvalidArgumentError(absl::StrCat("database '", url,
                                                 "' is not one of sqlite:PATH, postgresql://..., postgres:CONNINFO"));
}

}  // namespace tessera::jobs
