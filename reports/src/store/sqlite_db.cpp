// SQLite statement and transaction wrappers (see sqlite_db.h).
#include "sqlite_db.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>

#include "crucible/core/quote.h"

namespace crucible::reports {

namespace {
// The database's file for an error message ("database" when it has none, as in memory).
std::string_view file_of(sqlite3* db) {
  const char* file = db ? sqlite3_db_filename(db, "main") : nullptr;
  return file && *file ? file : "database";
}
}  // namespace

void throw_sqlite(sqlite3* db, std::string_view what) {
  throw StoreError(
      fmt::format("{}: {}: {}", file_of(db), what, db ? sqlite3_errmsg(db) : "out of memory"));
}

void exec(sqlite3* db, std::string_view sql) {
  char* err = nullptr;
  if (sqlite3_exec(db, std::string(sql).c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "unknown error";
    sqlite3_free(err);
    throw StoreError(fmt::format("{}: {}", file_of(db), msg));
  }
}

Status stored_status(std::string_view name, std::string_view where) {
  if (const std::optional<Status> s = status_from_name(name)) return *s;
  throw StoreError(
      fmt::format("{}: status '{}' is not one this crucible knows", where, escape_controls(name)));
}

Statement::Statement(sqlite3* db, std::string_view sql) : db_(db) {
  if (sqlite3_prepare_v2(db, sql.data(), static_cast<int>(sql.size()), &stmt_, nullptr) !=
      SQLITE_OK) {
    throw_sqlite(db, "prepare");
  }
}

Statement::~Statement() { sqlite3_finalize(stmt_); }

Statement& Statement::bind(int i, int64_t v) {
  if (sqlite3_bind_int64(stmt_, i, v) != SQLITE_OK) throw_sqlite(db_, "bind");
  return *this;
}
Statement& Statement::bind(int i, double v) {
  if (sqlite3_bind_double(stmt_, i, v) != SQLITE_OK) throw_sqlite(db_, "bind");
  return *this;
}
Statement& Statement::bind(int i, std::string_view v) {
  if (sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT) !=
      SQLITE_OK) {
    throw_sqlite(db_, "bind");
  }
  return *this;
}
Statement& Statement::bind(int i, const std::optional<double>& v) {
  return v ? bind(i, *v) : bind_null(i);
}
Statement& Statement::bind_blob(int i, const void* data, size_t bytes) {
  if (sqlite3_bind_blob(stmt_, i, data, static_cast<int>(bytes), SQLITE_TRANSIENT) != SQLITE_OK) {
    throw_sqlite(db_, "bind");
  }
  return *this;
}
Statement& Statement::bind_null(int i) {
  if (sqlite3_bind_null(stmt_, i) != SQLITE_OK) throw_sqlite(db_, "bind");
  return *this;
}

bool Statement::step() {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  throw_sqlite(db_, "step");
}

void Statement::run() {
  while (step()) {
  }
}

void Statement::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

int Statement::columns() const { return sqlite3_column_count(stmt_); }

int64_t Statement::int64(int col) const { return sqlite3_column_int64(stmt_, col); }
double Statement::real(int col) const { return sqlite3_column_double(stmt_, col); }
std::optional<double> Statement::optional_real(int col) const {
  if (sqlite3_column_type(stmt_, col) == SQLITE_NULL) return std::nullopt;
  return sqlite3_column_double(stmt_, col);
}
std::string Statement::text(int col) const {
  const unsigned char* t = sqlite3_column_text(stmt_, col);
  return t ? reinterpret_cast<const char*>(t) : "";
}
std::vector<double> Statement::doubles_blob(int col) const {
  const void* p = sqlite3_column_blob(stmt_, col);
  const auto bytes = static_cast<size_t>(sqlite3_column_bytes(stmt_, col));
  // Every list crucible stores is timings or counts: finite. A NaN would hang or break the
  // statistics (sorting with it is undefined), so a damaged blob is refused where it is read.
  auto damaged = [&](std::string_view what) {
    const char* name = sqlite3_column_name(stmt_, col);
    throw StoreError(
        fmt::format("{}: column '{}' {} (a damaged row)", file_of(db_), name ? name : "?", what));
  };
  if (bytes % sizeof(double) != 0)
    damaged(fmt::format("holds {} bytes, not a list of doubles", bytes));
  std::vector<double> out(bytes / sizeof(double));
  if (p && !out.empty()) std::memcpy(out.data(), p, out.size() * sizeof(double));
  for (double v : out) {
    if (!std::isfinite(v)) damaged(fmt::format("holds {}, not a finite number", v));
  }
  return out;
}

Transaction::Transaction(sqlite3* db) : db_(db) { exec(db_, "BEGIN IMMEDIATE"); }
Transaction::~Transaction() {
  if (!done_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
}
void Transaction::commit() {
  exec(db_, "COMMIT");
  done_ = true;
}

}  // namespace crucible::reports
