#!/usr/bin/env bash
# Builds crucible under sanitizers in a tree of its own and runs the unit tests there:
#   bash ci/sanitize.sh [--all] [address,undefined|thread]     (default address,undefined)
# --all builds and runs the slow tests too (not in CI: about 16 minutes more; see the guide).
# A finding fails the run and is printed; docs/guide/sanitizers.md says what runs and why.
set -euo pipefail
cd "$(dirname "$0")/.."
TESTS=unit
if [ "${1:-}" = --all ]; then TESTS=all; shift; fi
SAN=${1:-address,undefined}
case "$SAN" in
  address,undefined | address | undefined) TREE=build-asan ;;
  thread) TREE=build-tsan ;;
  *) echo "sanitize: expected address,undefined or thread, got '$SAN'" >&2; exit 2 ;;
esac
start=$(date +%s)
# GNU nproc reports OMP_NUM_THREADS / OMP_THREAD_LIMIT (set below): count without them.
cpus=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
# The libtorch peer stays out: its tests are all slow, and PyTorch is not built with the sanitizer.
# This tree compiles file by file (no unity batches), so a source that leans on an include another
# file of its batch made fails here rather than when the batches change.
BUILD_DIR=$TREE CRUCIBLE_CMAKE_ARGS="-DCRUCIBLE_SANITIZE=$SAN -DCRUCIBLE_TESTS=$TESTS \
  -DCMAKE_DISABLE_FIND_PACKAGE_Torch=ON -DCRUCIBLE_UNITY_BUILD=OFF" bash ci/setup.sh
built=$(date +%s)

# Reports go to files, one per process, so a finding in a worker whose output a test throws away
# is still seen. handle_segv=0 and friends keep the harness's own containment (a plugin's SIGSEGV
# is a `crash` status); abort_on_error turns a finding in a worker into a crash the run records.
LOGS=$PWD/$TREE/sanitizer-logs
rm -rf "$LOGS" && mkdir -p "$LOGS"
# Workers are sandboxed (docs/guide/running.md): the reports' folder is one they may write.
export CRUCIBLE_WORKER_WRITABLE=$LOGS
export ASAN_OPTIONS="abort_on_error=1:halt_on_error=1:detect_leaks=1:handle_segv=0:handle_sigbus=0:\
handle_sigfpe=0:handle_abort=0:check_initialization_order=1:strict_init_order=1:\
allocator_may_return_null=1:max_allocation_size_mb=8192:malloc_context_size=20:log_path=$LOGS/asan"
export UBSAN_OPTIONS="halt_on_error=1:abort_on_error=1:print_stacktrace=1:log_path=$LOGS/ubsan"
export LSAN_OPTIONS="suppressions=$PWD/ci/sanitizers/lsan.supp:print_suppressions=0"
export TSAN_OPTIONS="halt_on_error=1:abort_on_error=1:second_deadlock_stack=1:handle_segv=0:\
handle_sigbus=0:handle_sigfpe=0:handle_abort=0:ignore_noninstrumented_modules=1:\
suppressions=$PWD/ci/sanitizers/tsan.supp:log_path=$LOGS/tsan"
if [ "$SAN" = thread ]; then
  # GNU OpenMP's barriers are futexes ThreadSanitizer cannot see (GCC bug 55561): every variable a
  # parallel region shares with the thread that forked it looks raced. One OpenMP thread per region
  # (a cap no num_threads clause passes) leaves the std::thread code (minify --jobs, the kernel
  # compile pool, the timing job's helpers, the hostile plugins' threads) checked, and no noise.
  # OMP_NUM_THREADS too: tests that call oneDNN without use_openmp_threads plan for it.
  export OMP_THREAD_LIMIT=1 OMP_NUM_THREADS=1
fi

status=0
labels=(-L unit) timeout=900
[ "$TESTS" = all ] && labels=() timeout=1800
ctest --test-dir "$TREE" "${labels[@]}" -j "$cpus" --timeout $timeout --output-on-failure ||
  status=$?
tested=$(date +%s)
if compgen -G "$LOGS/*" >/dev/null; then
  echo "sanitize: $SAN reported findings:" >&2
  for f in "$LOGS"/*; do echo "== $f" >&2; head -60 "$f" >&2; done
  status=1
fi
if [ "$TESTS" = all ]; then
  what="every test (the libtorch peer's are not built here)"
else
  what="the unit tests (ctest -L unit; the slow ones and the libtorch peer's are not built here)"
fi
echo "sanitize: $SAN on $what: build $((built - start)) s, tests $((tested - built)) s, exit $status"
exit $status
