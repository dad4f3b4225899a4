// A process of this user without capabilities, as a worker is, that sleeps until killed: the
// target the privilege and sandbox tests try to read, trace or signal from a worker.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include "privileges.h"

namespace crucible::testing {

// Forks it; `then` runs in the child after its privileges are dropped (false: it exits 1, and the
// test fails here). Returns its pid, for the caller to kill and reap.
template <typename Then>
pid_t capless_sleeper(Then then) {
  const NoPrivileges none = prepare_no_privileges();
  int ready[2];
  if (::pipe(ready) != 0) return -1;
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (!drop_privileges(none) || !then()) ::_exit(1);
    [[maybe_unused]] const ssize_t n = ::write(ready[1], "r", 1);
    for (;;) ::pause();
  }
  ::close(ready[1]);
  char c = 0;
  EXPECT_EQ(::read(ready[0], &c, 1), 1) << "the sleeper did not start";
  ::close(ready[0]);
  return pid;
}

}  // namespace crucible::testing
