// SHA-256 (FIPS 180-4) for the kernel cache: keys over (compiler, flags, sources) and digests of
// cached objects. Private to crucible_compiler; our own so the library needs no crypto dependency.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace crucible::codegen {

// Incremental hasher: update() any number of times, then hex_digest() once.
class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t size);
  void update(std::string_view s) { update(s.data(), s.size()); }
  // Feeds the length, then the bytes: a sequence of fields hashed this way cannot collide with a
  // different split of the same bytes ("ab","c" vs "a","bc"), which plain concatenation would
  // allow.
  void update_field(std::string_view s);
  std::array<uint8_t, 32> digest();  // finishes the hash; the object must not be updated afterwards
  std::string hex_digest();

 private:
  void compress(const uint8_t* block);
  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> buffer_{};
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

std::string sha256_hex(std::string_view data);
// Hashes a file's bytes; throws crucible::Error if it cannot be read.
std::string sha256_file_hex(const std::filesystem::path& path);

}  // namespace crucible::codegen
