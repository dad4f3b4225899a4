// What a hostile plugin does to redirect calls in other libraries of its process: rewrite the
// GOT entries bound to a symbol in every loaded object (RELRO pages made writable with mprotect).
#pragma once

#include <elf.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

namespace attack {

struct GotPatch {
  const char* symbol;
  void* replacement;
  int patched = 0;
};

inline void patch_slot(void** slot, void* value) {
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  auto* start = reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(slot) & ~(page - 1));
  ::mprotect(start, page, PROT_READ | PROT_WRITE);
  *slot = value;
}

// Every R_X86_64_JUMP_SLOT and GLOB_DAT relocation of one object naming p->symbol.
inline int patch_object(dl_phdr_info* info, size_t, void* data) {
  auto* p = static_cast<GotPatch*>(data);
  const ElfW(Dyn)* dyn = nullptr;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    if (info->dlpi_phdr[i].p_type == PT_DYNAMIC) {
      dyn = reinterpret_cast<const ElfW(Dyn)*>(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    }
  }
  if (!dyn) return 0;
  const ElfW(Sym)* symtab = nullptr;
  const char* strtab = nullptr;
  const ElfW(Rela)* jmprel = nullptr, *rela = nullptr;
  size_t jmprel_size = 0, rela_size = 0;
  for (const ElfW(Dyn)* d = dyn; d->d_tag != DT_NULL; ++d) {
    const auto ptr = d->d_un.d_ptr;
    switch (d->d_tag) {
      case DT_SYMTAB:
        symtab = reinterpret_cast<const ElfW(Sym)*>(ptr);
        break;
      case DT_STRTAB:
        strtab = reinterpret_cast<const char*>(ptr);
        break;
      case DT_JMPREL:
        jmprel = reinterpret_cast<const ElfW(Rela)*>(ptr);
        break;
      case DT_PLTRELSZ:
        jmprel_size = d->d_un.d_val;
        break;
      case DT_RELA:
        rela = reinterpret_cast<const ElfW(Rela)*>(ptr);
        break;
      case DT_RELASZ:
        rela_size = d->d_un.d_val;
        break;
      default:
        break;
    }
  }
  if (!symtab || !strtab) return 0;
  auto scan = [&](const ElfW(Rela) * r, size_t bytes) {
    if (!r) return;
    for (size_t i = 0; i < bytes / sizeof(ElfW(Rela)); ++i) {
      const auto type = ELF64_R_TYPE(r[i].r_info);
      if (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT) continue;
      const char* name = strtab + symtab[ELF64_R_SYM(r[i].r_info)].st_name;
      if (std::strcmp(name, p->symbol) != 0) continue;
      patch_slot(reinterpret_cast<void**>(info->dlpi_addr + r[i].r_offset), p->replacement);
      ++p->patched;
    }
  };
  scan(jmprel, jmprel_size);
  scan(rela, rela_size);
  return 0;
}

// Patches `symbol` in every object loaded now; returns how many slots were rewritten.
inline int patch_everywhere(const char* symbol, void* replacement) {
  GotPatch p{symbol, replacement};
  dl_iterate_phdr(patch_object, &p);
  return p.patched;
}

}  // namespace attack
