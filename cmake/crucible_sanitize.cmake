# Sanitizer builds: -DCRUCIBLE_SANITIZE=address,undefined (ASan + UBSan) or =thread (TSan), for
# every crucible target, and -DCRUCIBLE_FUZZ=ON (clang) for libFuzzer's coverage on top of ASan and
# UBSan. ci/sanitize.sh and ci/fuzz.sh build and run them; docs/guide/sanitizers.md says how.
set(CRUCIBLE_SANITIZE "" CACHE STRING "sanitizers for every target: address,undefined | thread")
option(CRUCIBLE_FUZZ "build the libFuzzer targets (clang; implies address,undefined)" OFF)
if(CRUCIBLE_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "CRUCIBLE_FUZZ needs clang (CXX=clang++-14): GCC has no libFuzzer")
  endif()
  set(CRUCIBLE_SANITIZE "address,undefined")
  # Coverage for libFuzzer in every crucible library; only the targets link libFuzzer's main.
  add_compile_options(-fsanitize=fuzzer-no-link)
  add_compile_definitions(FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION)
endif()
if(CRUCIBLE_SANITIZE)
  if(NOT CRUCIBLE_SANITIZE MATCHES "^(address|undefined|thread)(,(address|undefined|thread))*$")
    message(FATAL_ERROR "CRUCIBLE_SANITIZE must list address, undefined or thread, got '${CRUCIBLE_SANITIZE}'")
  endif()
  if(CRUCIBLE_SANITIZE MATCHES "thread" AND CRUCIBLE_SANITIZE MATCHES "address")
    message(FATAL_ERROR "CRUCIBLE_SANITIZE: thread and address cannot share one build")
  endif()
  # -O1 keeps the stacks the reports print whole; -O3's inlining drops frames and costs build time.
  set(CMAKE_CXX_FLAGS_RELWITHDEBINFO "-O1 -g1 -DNDEBUG")
  add_compile_options(-fsanitize=${CRUCIBLE_SANITIZE} -fno-omit-frame-pointer
    -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${CRUCIBLE_SANITIZE})
  if(CRUCIBLE_SANITIZE MATCHES "undefined")
    # GCC leaves a float-to-integer conversion out of range out of "undefined"; clang has it in.
    # float-divide-by-zero stays out: the kernels rely on IEEE infinities and NaNs.
    add_compile_options(-fsanitize=float-cast-overflow)
  endif()
  # No _GLIBCXX_SANITIZE_VECTOR: its annotations must be in every object that grows a vector, and
  # Debian's libgtest.a and the headers' instantiations it shares are not (a false
  # heap-buffer-overflow in gtest's test registration, at start-up).
  # The code that must behave differently under a sanitizer (no RLIMIT_AS, no preloaded
  # allocator, no Valgrind) names it in its messages.
  add_compile_definitions(_GLIBCXX_ASSERTIONS CRUCIBLE_SANITIZED="${CRUCIBLE_SANITIZE}")
endif()
