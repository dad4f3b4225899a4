// Tensors handed between processes as a file: a worker writes the outputs it computed, the parent
// reads them back to judge them. The reader treats the file as hostile (a plugin wrote it).
#pragma once

#include <cstdio>
#include <filesystem>
#include <vector>

#include "crucible/core/tensor.h"

namespace crucible {

// Groups of tensors (say eager's outputs and the fp64 reference), each tensor contiguous in
// logical order; undefined tensors are kept as such. Written to a temporary name and renamed, so a
// reader never sees half a file from a writer that died.
using TensorGroups = std::vector<std::vector<Tensor>>;
void write_tensor_file(const std::filesystem::path& path, const TensorGroups& groups);

// The same, one group at a time, so a writer holds one group in memory (a tie's fp64 outputs of
// a full-size training step are 800 MB and there may be 16). The file appears at finish(); one
// never finished leaves nothing. Throws Error when the file cannot be written.
class TensorFileWriter {
 public:
  explicit TensorFileWriter(std::filesystem::path path);
  ~TensorFileWriter();
  TensorFileWriter(const TensorFileWriter&) = delete;
  TensorFileWriter& operator=(const TensorFileWriter&) = delete;
  void add(const std::vector<Tensor>& group);
  void finish();

 private:
  void bytes(const void* p, size_t n);
  void u64(uint64_t v) { bytes(&v, sizeof v); }
  void u8(uint8_t v) { bytes(&v, 1); }
  [[noreturn]] void fail() const;

  std::filesystem::path path_, tmp_;
  std::FILE* file_ = nullptr;
  uint64_t at_ = 0, groups_ = 0;
  bool ok_ = true;
};

// The tensors borrow a private (copy-on-write) mapping of the file, so the file may be removed
// once read; the reader must know that no process can still change the file's size (a worker's
// whole tree is killed before its hand-off is read): a mapping past a file's end faults.
// Throws Error naming the file and what is wrong (bad magic, a size the file does not hold, an
// unknown dtype, padding that is not zeros, trailing bytes) before taking more than the file
// holds.
TensorGroups read_tensor_file(const std::filesystem::path& path);

}  // namespace crucible
