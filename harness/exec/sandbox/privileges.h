// What a worker, which loads untrusted plugin code, can do to other processes: nothing a missing
// capability or a private memory stops (docs/guide/threat_model.md, "Other processes").
#pragma once

namespace crucible {

// Set in a worker's environment when its parent can read memory kept private (it holds
// CAP_SYS_PTRACE): the worker then keeps its own private too (keep_memory_private).
inline constexpr const char* kPrivateMemoryEnv = "CRUCIBLE_PRIVATE_MEMORY";

// Called first in main(). Makes this process non-dumpable, so that its memory can be read or
// written (ptrace, process_vm_readv/writev, /proc/PID/mem) only by a process holding
// CAP_SYS_PTRACE, which no worker holds. The harness always does; a worker only when
// kPrivateMemoryEnv says its parent can still read it (the timing's outputs are read so).
void keep_memory_private(bool is_worker);

// Whether this process holds CAP_SYS_PTRACE in its effective set.
bool can_read_private_memory();

// Prepared before fork (reads /proc and the capability sets); applied in the child.
struct NoPrivileges {
  int last_cap = 63;  // /proc/sys/kernel/cap_last_cap
  bool holds_any = false;
};
NoPrivileges prepare_no_privileges();

// In a forked child before exec, async-signal-safe: no privilege can be gained through exec
// (PR_SET_NO_NEW_PRIVS), and when the child holds any capability (a root harness), its bounding,
// ambient, inheritable, permitted and effective sets are emptied, so that root's exec gains none.
// False when a step failed (errno says why).
bool drop_privileges(const NoPrivileges& p);

}  // namespace crucible
