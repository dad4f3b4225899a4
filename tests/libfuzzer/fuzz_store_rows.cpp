// libFuzzer target: a sound store file with forged rows. The input is SQL run on a freshly
// migrated store (each statement on its own), then every reader runs on it, then a merge.
#include <sqlite3.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <string>
#include <string_view>

#include "crucible/core/error.h"
#include "crucible/reports/store.h"
#include "fuzz_support.h"

namespace {

namespace fs = std::filesystem;
using crucible::reports::Store;

// Statements that reach outside the database file (ATTACH and VACUUM INTO create files anywhere,
// the *_directory pragmas move SQLite's temporary files) are not what a forged store can hold.
bool reaches_outside(std::string_view sql) {
  std::string lower(sql);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const char* word : {"attach", "vacuum", "load_extension", "_directory"}) {
    if (lower.find(word) != std::string::npos) return true;
  }
  return false;
}

// Runs each statement of `sql` on `db`, going on past the ones SQLite refuses. The whole input
// may step 10^6 virtual-machine instructions and make values of 64 KiB: a recursive query is
// bounded.
void run_statements(const fs::path& db, const std::string& sql) {
  sqlite3* h = nullptr;
  if (sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
    sqlite3_close(h);
    return;
  }
  sqlite3_limit(h, SQLITE_LIMIT_LENGTH, 1 << 16);
  int ticks = 0;
  sqlite3_progress_handler(
      h, 1000, [](void* n) { return ++*static_cast<int*>(n) > 1000 ? 1 : 0; }, &ticks);
  const char* at = sql.c_str();
  const char* end = at + sql.size();
  while (at < end && *at != '\0') {
    sqlite3_stmt* st = nullptr;
    const char* next = nullptr;
    if (sqlite3_prepare_v2(h, at, static_cast<int>(end - at), &st, &next) != SQLITE_OK) {
      const char* semi = std::find(at, end, ';');
      at = semi == end ? end : semi + 1;
      continue;
    }
    while (st != nullptr && sqlite3_step(st) == SQLITE_ROW) {
    }
    sqlite3_finalize(st);
    at = next != nullptr && next > at ? next : end;
  }
  sqlite3_close(h);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string sql(crucible::fuzz::as_text(data, size));
  if (reaches_outside(sql)) return 0;
  const fs::path dir = crucible::fuzz::scratch_dir() / "store_rows";
  fs::remove_all(dir);
  const fs::path db =
      crucible::fuzz::write_scratch("store_rows/shard.db", crucible::fuzz::empty_store());
  run_statements(db, sql);
  try {
    auto s = Store::open_readonly(db);
    crucible::fuzz::read_store(*s);
  } catch (const crucible::Error&) {
  }
  try {
    Store::open(crucible::fuzz::write_scratch("store_rows/main.db", crucible::fuzz::empty_store()))
        ->merge(db);
  } catch (const crucible::Error&) {
  }
  return 0;
}
