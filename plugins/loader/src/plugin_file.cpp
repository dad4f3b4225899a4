// Plugin file checks before dlopen (see plugin_file.h): file type through lstat/stat, then the ELF
// header, the program and section header tables and every segment's extent against the file size.
#include "crucible/plugin_file.h"

#include <elf.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <link.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <string>
#include <vector>

#include "crucible/core/quote.h"
#include "crucible/plugin_loader.h"

namespace crucible {

namespace fs = std::filesystem;

namespace {

#if defined(__x86_64__)
constexpr uint16_t kHostMachine = EM_X86_64;
#elif defined(__aarch64__)
constexpr uint16_t kHostMachine = EM_AARCH64;
#elif defined(__i386__)
constexpr uint16_t kHostMachine = EM_386;
#elif defined(__arm__)
constexpr uint16_t kHostMachine = EM_ARM;
#elif defined(__powerpc64__)
constexpr uint16_t kHostMachine = EM_PPC64;
#elif defined(__riscv)
constexpr uint16_t kHostMachine = EM_RISCV;
#elif defined(__s390x__)
constexpr uint16_t kHostMachine = EM_S390;
#else
#error "plugin_file.cpp: add this host's ELF machine (EM_*) above"
#endif

#if defined(__LP64__)
constexpr unsigned char kHostClass = ELFCLASS64;
#else
constexpr unsigned char kHostClass = ELFCLASS32;
#endif

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
constexpr unsigned char kHostData = ELFDATA2LSB;
#else
constexpr unsigned char kHostData = ELFDATA2MSB;
#endif

// Header tables larger than this are refused rather than read: real libraries have tens of
// entries, and a crafted count must not make us allocate gigabytes.
constexpr uint64_t kMaxTableEntries = 1 << 20;

using Ehdr = ElfW(Ehdr);
using Phdr = ElfW(Phdr);
using Shdr = ElfW(Shdr);

std::string shown(const fs::path& p) { return escape_controls(p.string()); }

[[noreturn]] void fail(const fs::path& file, const std::string& why) {
  throw PluginError(fmt::format("{}: {}", shown(file), why));
}

[[noreturn]] void not_loadable(const fs::path& file, const std::string& why) {
  fail(file, fmt::format("not a loadable shared library ({})", why));
}

std::string kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a regular file";
}

std::string machine_name(uint16_t m) {
  switch (m) {
    case EM_X86_64:
      return "x86-64";
    case EM_386:
      return "x86 (32-bit)";
    case EM_AARCH64:
      return "AArch64";
    case EM_ARM:
      return "ARM (32-bit)";
    case EM_PPC64:
      return "PowerPC64";
    case EM_RISCV:
      return "RISC-V";
    case EM_S390:
      return "s390";
    default:
      return fmt::format("ELF machine {}", m);
  }
}

std::string segment_name(uint32_t type) {
  switch (type) {
    case PT_LOAD:
      return "PT_LOAD";
    case PT_DYNAMIC:
      return "PT_DYNAMIC";
    case PT_INTERP:
      return "PT_INTERP";
    case PT_NOTE:
      return "PT_NOTE";
    case PT_GNU_EH_FRAME:
      return "PT_GNU_EH_FRAME";
    default:
      return fmt::format("type {:#x}", type);
  }
}

// [offset, offset + length) lies inside a file of `size` bytes, without overflow.
bool inside(uint64_t offset, uint64_t length, uint64_t size) {
  return offset <= size && length <= size - offset;
}

// Reads exactly n bytes at `offset`; false on a short read or an error.
bool read_at(int fd, void* buf, size_t n, uint64_t offset) {
  auto* p = static_cast<char*>(buf);
  while (n > 0) {
    const ssize_t got = ::pread(fd, p, n, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    p += got;
    n -= static_cast<size_t>(got);
    offset += static_cast<uint64_t>(got);
  }
  return true;
}

// Follows `file` and refuses anything that is not a regular file, naming what it is instead.
void check_file_type(const fs::path& file) {
  struct stat link {};
  if (::lstat(file.c_str(), &link) != 0) {
    if (errno == ENOENT) fail(file, "plugin file does not exist");
    fail(file, fmt::format("cannot read the plugin file: {}", strerror(errno)));
  }
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0) {
    const int err = errno;
    if (S_ISLNK(link.st_mode)) {
      if (err == ELOOP) fail(file, "symlink loop (too many levels of symbolic links)");
      std::error_code ec;
      const fs::path target = fs::read_symlink(file, ec);
      if (err == ENOENT) {
        fail(file,
             fmt::format("dangling symlink to {} (the target does not exist)", shown(target)));
      }
      fail(file, fmt::format("cannot follow the symlink to {}: {}", shown(target), strerror(err)));
    }
    fail(file, fmt::format("cannot read the plugin file: {}", strerror(err)));
  }
  if (!S_ISREG(st.st_mode)) {
    fail(file, fmt::format("is {}, not a plugin (a shared library file)", kind_of(st.st_mode)));
  }
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// The ELF identification: magic, class, byte order and version of this host.
void check_ident(const fs::path& file, const unsigned char* ident, uint64_t size) {
  if (size < SELFMAG || memcmp(ident, ELFMAG, SELFMAG) != 0) {
    not_loadable(file, "not an ELF file");
  }
  if (size < EI_NIDENT) {
    not_loadable(file, fmt::format("truncated: {} bytes, shorter than an ELF header", size));
  }
  if (ident[EI_CLASS] != kHostClass) {
    not_loadable(file, fmt::format("{} ELF file, this crucible is {}",
                                   ident[EI_CLASS] == ELFCLASS32   ? "32-bit"
                                   : ident[EI_CLASS] == ELFCLASS64 ? "64-bit"
                                                                   : "unknown-class",
                                   kHostClass == ELFCLASS64 ? "64-bit" : "32-bit"));
  }
  if (ident[EI_DATA] != kHostData) {
    not_loadable(file, fmt::format("{} ELF file, this host is {}",
                                   ident[EI_DATA] == ELFDATA2MSB   ? "big-endian"
                                   : ident[EI_DATA] == ELFDATA2LSB ? "little-endian"
                                                                   : "unknown byte order",
                                   kHostData == ELFDATA2LSB ? "little-endian" : "big-endian"));
  }
  if (ident[EI_VERSION] != EV_CURRENT) {
    not_loadable(file, fmt::format("unknown ELF version {}", ident[EI_VERSION]));
  }
}

// The section header table (`first`: its section 0, nullptr when it could not be read), every
// section's bytes inside the file. A library without the table (as sstrip leaves one) is fine.
void check_sections(const fs::path& file, int fd, const Ehdr& eh, const Shdr* first,
                    uint64_t size) {
  if (eh.e_shoff == 0) return;
  if (eh.e_shentsize != sizeof(Shdr)) {
    not_loadable(file,
                 fmt::format("section header size {}, expected {}", eh.e_shentsize, sizeof(Shdr)));
  }
  if (first == nullptr) {
    not_loadable(file, fmt::format("truncated: the section header table at offset {} lies past "
                                   "the end of the file ({} bytes)",
                                   eh.e_shoff, size));
  }
  const uint64_t shnum = eh.e_shnum != 0 ? eh.e_shnum : first->sh_size;
  if (shnum > kMaxTableEntries) {
    not_loadable(file, fmt::format("implausible section header count {}", shnum));
  }
  if (!inside(eh.e_shoff, shnum * sizeof(Shdr), size)) {
    not_loadable(file, fmt::format("truncated: the section header table (offset {}, {} bytes) ends "
                                   "past the end of the file ({} bytes)",
                                   eh.e_shoff, shnum * sizeof(Shdr), size));
  }
  if (shnum > 0) {
    std::vector<Shdr> shdrs(shnum);
    if (!read_at(fd, shdrs.data(), shnum * sizeof(Shdr), eh.e_shoff)) {
      fail(file, fmt::format("cannot read the plugin file: {}", strerror(errno)));
    }
    for (size_t i = 1; i < shdrs.size(); ++i) {
      const Shdr& sh = shdrs[i];
      if (sh.sh_type == SHT_NOBITS || sh.sh_size == 0) continue;
      if (!inside(sh.sh_offset, sh.sh_size, size)) {
        not_loadable(file, fmt::format("truncated: section {} (file bytes {} to {}) ends past the "
                                       "end of the file ({} bytes)",
                                       i, sh.sh_offset, sh.sh_offset + sh.sh_size, size));
      }
    }
  }
}

void check_elf(const fs::path& file) {
  // O_NONBLOCK: if the file was swapped for a FIFO since the stat above, open must not wait for a
  // writer. fstat below then sees what was really opened.
  Fd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
  if (fd.get() < 0) fail(file, fmt::format("cannot open the plugin file: {}", strerror(errno)));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    fail(file, fmt::format("cannot read the plugin file: {}", strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    fail(file, fmt::format("is {}, not a plugin (a shared library file)", kind_of(st.st_mode)));
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size == 0) not_loadable(file, "empty file");

  unsigned char ident[EI_NIDENT] = {};
  const bool have_ident = read_at(fd.get(), ident, std::min<uint64_t>(size, EI_NIDENT), 0);
  if (!have_ident) fail(file, fmt::format("cannot read the plugin file: {}", strerror(errno)));
  check_ident(file, ident, size);
  if (size < sizeof(Ehdr)) {
    not_loadable(file, fmt::format("truncated: {} bytes, shorter than the {}-byte ELF header", size,
                                   sizeof(Ehdr)));
  }
  Ehdr eh{};
  if (!read_at(fd.get(), &eh, sizeof eh, 0)) {
    fail(file, fmt::format("cannot read the plugin file: {}", strerror(errno)));
  }
  if (eh.e_type != ET_DYN) {
    const char* type = eh.e_type == ET_EXEC   ? "an executable"
                       : eh.e_type == ET_REL  ? "an object file (.o)"
                       : eh.e_type == ET_CORE ? "a core dump"
                                              : "of an unknown ELF type";
    not_loadable(file, fmt::format("it is {}, not a shared object", type));
  }
  if (eh.e_machine != kHostMachine) {
    not_loadable(file, fmt::format("built for {}, this host is {}", machine_name(eh.e_machine),
                                   machine_name(kHostMachine)));
  }
  if (eh.e_ehsize < sizeof(Ehdr)) {
    not_loadable(file, fmt::format("ELF header size {} is below {}", eh.e_ehsize, sizeof(Ehdr)));
  }

  // Program headers and segments first (what dlopen maps), then the section header table. Section
  // 0 holds the real counts when they overflow the header's 16-bit fields.
  Shdr first{};
  const bool have_first = eh.e_shoff != 0 && eh.e_shentsize == sizeof(Shdr) &&
                          inside(eh.e_shoff, sizeof(Shdr), size) &&
                          read_at(fd.get(), &first, sizeof first, eh.e_shoff);
  uint64_t phnum = eh.e_phnum;
  if (phnum == PN_XNUM) {
    if (!have_first) not_loadable(file, "extended program header count without a section 0");
    phnum = first.sh_info;
  }
  if (phnum == 0) not_loadable(file, "no program headers");
  if (phnum > kMaxTableEntries) {
    not_loadable(file, fmt::format("implausible program header count {}", phnum));
  }
  if (eh.e_phentsize != sizeof(Phdr)) {
    not_loadable(file,
                 fmt::format("program header size {}, expected {}", eh.e_phentsize, sizeof(Phdr)));
  }
  if (!inside(eh.e_phoff, phnum * sizeof(Phdr), size)) {
    not_loadable(file, fmt::format("truncated: the program header table (offset {}, {} bytes) ends "
                                   "past the end of the file ({} bytes)",
                                   eh.e_phoff, phnum * sizeof(Phdr), size));
  }
  std::vector<Phdr> phdrs(phnum);
  if (!read_at(fd.get(), phdrs.data(), phnum * sizeof(Phdr), eh.e_phoff)) {
    fail(file, fmt::format("cannot read the plugin file: {}", strerror(errno)));
  }
  size_t loads = 0;
  bool dynamic = false;
  for (size_t i = 0; i < phdrs.size(); ++i) {
    const Phdr& ph = phdrs[i];
    if (ph.p_type == PT_LOAD) {
      ++loads;
      if (ph.p_filesz > ph.p_memsz) {
        not_loadable(file, fmt::format("PT_LOAD segment {} has more file bytes ({}) than memory "
                                       "bytes ({})",
                                       i, ph.p_filesz, ph.p_memsz));
      }
    }
    dynamic = dynamic || ph.p_type == PT_DYNAMIC;
    // Every segment with file contents, PT_LOAD first of all: dlopen maps those bytes.
    if (ph.p_filesz > 0 && !inside(ph.p_offset, ph.p_filesz, size)) {
      not_loadable(file, fmt::format("truncated: {} segment {} (file bytes {} to {}) ends past the "
                                     "end of the file ({} bytes)",
                                     segment_name(ph.p_type), i, ph.p_offset,
                                     ph.p_offset + ph.p_filesz, size));
    }
  }
  if (loads == 0) not_loadable(file, "no loadable (PT_LOAD) segment");
  if (!dynamic) not_loadable(file, "no dynamic section (PT_DYNAMIC)");

  check_sections(file, fd.get(), eh, have_first ? &first : nullptr, size);
}

}  // namespace

bool path_entry_exists(const fs::path& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

void validate_plugin_file(const fs::path& file) {
  check_file_type(file);
  check_elf(file);
}

}  // namespace crucible
