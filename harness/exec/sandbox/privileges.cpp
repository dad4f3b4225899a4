// Capabilities and private memory of the harness and its workers (see privileges.h).
#include "privileges.h"

#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>

namespace crucible {

namespace {

bool capabilities(__user_cap_data_struct (&d)[2]) {
  __user_cap_header_struct h{_LINUX_CAPABILITY_VERSION_3, 0};
  return ::syscall(SYS_capget, &h, d) == 0;
}

}  // namespace

void keep_memory_private(bool is_worker) {
  if (is_worker && std::getenv(kPrivateMemoryEnv) == nullptr) return;
  ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
}

bool can_read_private_memory() {
  __user_cap_data_struct d[2] = {};
  if (!capabilities(d)) return false;
  return (d[CAP_SYS_PTRACE / 32].effective & (1u << (CAP_SYS_PTRACE % 32))) != 0;
}

NoPrivileges prepare_no_privileges() {
  NoPrivileges p;
  std::ifstream in("/proc/sys/kernel/cap_last_cap");
  int last = 0;
  if (in >> last && last > 0 && last < 64) p.last_cap = last;
  __user_cap_data_struct d[2] = {};
  p.holds_any = capabilities(d) && (d[0].permitted != 0 || d[1].permitted != 0 ||
                                    d[0].inheritable != 0 || d[1].inheritable != 0);
  return p;
}

bool drop_privileges(const NoPrivileges& p) {
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return false;
  if (!p.holds_any) return true;
  for (int c = 0; c <= p.last_cap; ++c) {
    if (::prctl(PR_CAPBSET_DROP, c, 0, 0, 0) != 0 && errno != EINVAL) return false;
  }
  // Kernels before 4.3 have no ambient set: nothing to clear there.
  if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL)
    return false;
  __user_cap_header_struct h{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct none[2] = {};
  return ::syscall(SYS_capset, &h, none) == 0;
}

}  // namespace crucible
