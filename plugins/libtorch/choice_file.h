// The peer's timed decisions kept in its kernel cache folder (linear_choices, clamp_choices): a
// context line first, so a file timed under another torch, CPU or BLAS core is timed anew.
#pragma once

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

namespace crucible::libtorch {

// What the peer's timings are taken under: torch, CPU model, OpenBLAS's core, a planted fault.
// Fixed for the process (the core is OpenBLAS's choice at load), so read once.
const std::string& choices_context();

// `name` in the worker's kernel cache folder for this backend; empty where there is none.
std::filesystem::path choices_file(const std::string& name);

// The lines after the context line, when the file's context is this process's (else none).
std::vector<std::string> read_choice_lines(const std::filesystem::path& file);

// The context line and `lines`, whole or not at all (a reader sees the old file or this one).
void write_choice_lines(const std::filesystem::path& file, const std::vector<std::string>& lines);

using Ms = std::chrono::duration<double, std::milli>;

// How long f() took, in ms of the process's steady clock.
template <typename F>
double time_ms(F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return Ms(std::chrono::steady_clock::now() - t0).count();
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace crucible::libtorch
