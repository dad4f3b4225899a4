// What the libFuzzer targets share: a scratch folder of their own (a file path for parsers that
// read files) and the rule that outside input may only end in crucible::Error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace crucible::reports {
class Store;
}

namespace crucible::fuzz {

// This process's scratch folder (under /dev/shm where it exists: the targets write each input),
// created on first use.
const std::filesystem::path& scratch_dir();

// Writes `bytes` to `name` in the scratch folder, replacing it; returns its path.
std::filesystem::path write_scratch(const std::string& name, std::string_view bytes);

// The whole content of the file at `p` ("" when it cannot be read).
std::string read_file_bytes(const std::filesystem::path& p);

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Splits `text` at lines "--- NAME": the part before the first such line is returned under "",
// each later part under its NAME (how one input carries a folder of files).
std::vector<std::pair<std::string, std::string>> split_sections(std::string_view text);

// The bytes of a freshly migrated empty store, made once (migrating one per input is most of a
// store target's time).
const std::string& empty_store();

// Every reader the history commands use, on the first runs and results of `s` (what a damaged
// or forged store must survive: only crucible::Error may come out).
void read_store(reports::Store& s);

}  // namespace crucible::fuzz

// Every target defines this; libFuzzer calls it with each input, replay_main.cpp with each file.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
