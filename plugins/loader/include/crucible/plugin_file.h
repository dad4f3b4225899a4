// Checks a plugin file before anything maps it: what kind of file it is (dangling symlink, loop,
// directory, FIFO) and whether its ELF headers and segments fit in it, so dlopen never faults.
#pragma once

#include <filesystem>

namespace crucible {

// Throws PluginError (one line naming `file`) unless `file` is a regular file (or a symlink to
// one) holding an ELF shared object for this host's class, byte order and machine whose ELF header,
// program header table, section header table, sections and segments (each PT_LOAD's file extent
// above all) lie inside the file. dlopen maps segments straight from the file, and touching a page
// past its end is SIGBUS, so a truncated library must be refused here. Reads only the headers;
// never blocks on a FIFO or reads a device.
void validate_plugin_file(const std::filesystem::path& file);

// Whether `path` names anything at all, a dangling symlink included (lstat succeeds).
bool path_entry_exists(const std::filesystem::path& path);

}  // namespace crucible
