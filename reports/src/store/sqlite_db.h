// Thin RAII wrappers over the SQLite C API: a prepared statement with typed binds and columns, and
// a transaction guard that rolls back unless committed. Every failure becomes a StoreError.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "crucible/reports/store.h"

namespace crucible::reports {

[[noreturn]] void throw_sqlite(sqlite3* db, std::string_view what);

class Statement {
 public:
  Statement(sqlite3* db, std::string_view sql);
  ~Statement();
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& bind(int index, int64_t v);
  Statement& bind(int index, double v);
  Statement& bind(int index, std::string_view v);
  Statement& bind(int index, const std::optional<double>& v);
  Statement& bind_blob(int index, const void* data, size_t bytes);
  Statement& bind_null(int index);

  bool step();  // true while a row is available
  void run();   // step to completion (for statements without rows)
  void reset();

  int columns() const;  // in each row
  int64_t int64(int col) const;
  double real(int col) const;
  std::optional<double> optional_real(int col) const;
  std::string text(int col) const;
  std::vector<double> doubles_blob(int col) const;

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

class Transaction {
 public:
  explicit Transaction(sqlite3* db);
  ~Transaction();
  void commit();

 private:
  sqlite3* db_;
  bool done_ = false;
};

void exec(sqlite3* db, std::string_view sql);

// A status read back from the store; a name this build does not know (a newer crucible's, or a
// damaged row) throws StoreError naming `where`.
Status stored_status(std::string_view name, std::string_view where);

}  // namespace crucible::reports
