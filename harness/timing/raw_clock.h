// CLOCK_MONOTONIC read by an inline system call, so a plugin that rewrites the clock_gettime
// entries of the process's GOT (or the vDSO's) cannot move the timing worker's clock.
#pragma once

#include <sys/syscall.h>
#include <time.h>

#include <cstdint>

namespace crucible {

// ns since an arbitrary point, the same clock as std::chrono::steady_clock. About 100-300 ns a
// read against 20 ns through the vDSO: a sample lasts --min-sample-ms, so it costs under 0.1%.
inline int64_t raw_monotonic_ns() {
  timespec ts{};
#if defined(__x86_64__)
  long ret;
  asm volatile("syscall"
               : "=a"(ret)
               : "0"(static_cast<long>(SYS_clock_gettime)), "D"(static_cast<long>(CLOCK_MONOTONIC)),
                 "S"(&ts)
               : "rcx", "r11", "memory");
  (void)ret;
#elif defined(__aarch64__)
  register long x8 asm("x8") = SYS_clock_gettime;
  register long x0 asm("x0") = CLOCK_MONOTONIC;
  register long x1 asm("x1") = reinterpret_cast<long>(&ts);
  asm volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1) : "memory");
#else
  clock_gettime(CLOCK_MONOTONIC, &ts);
#endif
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace crucible
