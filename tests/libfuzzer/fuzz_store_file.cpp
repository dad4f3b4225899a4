// libFuzzer target: a damaged store. The bytes are the database file; every reader the history
// commands use runs on it read-only, then it is opened for writing (migration) and merged into a
// fresh store, as `crucible merge` would take a shard from another machine.
#include <filesystem>

#include "crucible/core/error.h"
#include "crucible/reports/store.h"
#include "fuzz_support.h"

using crucible::reports::Store;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace fs = std::filesystem;
  const fs::path dir = crucible::fuzz::scratch_dir() / "store";
  fs::remove_all(dir);
  const fs::path db =
      crucible::fuzz::write_scratch("store/shard.db", crucible::fuzz::as_text(data, size));
  try {
    auto s = Store::open_readonly(db);
    crucible::fuzz::read_store(*s);
  } catch (const crucible::Error&) {
  }
  try {
    auto s = Store::open(db);
    crucible::fuzz::read_store(*s);
    Store::open(crucible::fuzz::write_scratch("store/main.db", crucible::fuzz::empty_store()))
        ->merge(db);
  } catch (const crucible::Error&) {
  }
  return 0;
}
