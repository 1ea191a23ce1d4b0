// Damages a store's write-ahead log the way a bad disk would, for the tests of WAL recovery.
#ifndef GRAIL_TESTS_TESTING_WAL_DAMAGE_H_
#define GRAIL_TESTS_TESTING_WAL_DAMAGE_H_

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

namespace grail {

struct DamagedWal {
  std::filesystem::path path;  // empty: the directory holds no WAL
  uintmax_t size = 0;          // its size, unchanged by the damage
};

// Flips bits of one byte at `fraction` (0..1) of the largest write-ahead log file in the
// store directory `dir` (RocksDB names them NNNNNN.log), so that valid records follow the
// damaged one.
inline DamagedWal FlipAByteOfTheLargestWal(const std::string& dir, double fraction) {
  DamagedWal wal;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() == ".log" && entry.file_size() > wal.size) {
      wal.path = entry.path();
      wal.size = entry.file_size();
    }
  }
  if (wal.path.empty()) return wal;
  const auto at = static_cast<std::streamoff>(static_cast<double>(wal.size) * fraction);
  std::fstream file(wal.path, std::ios::in | std::ios::out | std::ios::binary);
  char byte = 0;
  file.seekg(at);
  file.read(&byte, 1);
  byte = static_cast<char>(byte ^ 0x5a);
  file.seekp(at);
  file.write(&byte, 1);
  return wal;
}

}  // namespace grail

#endif  // GRAIL_TESTS_TESTING_WAL_DAMAGE_H_
