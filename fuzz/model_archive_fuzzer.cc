// libFuzzer target: GrailModel::Load on hostile archives. Whatever the bytes, Load returns
// a model or an error naming the path; it must not crash, hang or leak. Seed it with a real
// archive (bench/fuzz.sh writes one) so that mutations reach past the zip container into the
// TorchScript code, the pickled constants and this project's own checks (format, config,
// relation names, tensor shapes, non-finite weights). With GRAIL_FUZZ_WRITE_SEED=PATH the
// binary writes such an archive (an untrained two-relation model) to PATH and exits.
//
// Byte mutations rarely get past the entries' CRC-32s, so half the mutations are made to the
// archive's structure instead, CRC-32s recomputed (tests/testing/archive_surgery.h): a tensor
// record cut or grown, two records swapped, or bytes mutated inside one entry (the pickles,
// the tensors). These reach the tensor-record checks, the pickle reader and the parameter
// digests; the TorchScript code entries are left to byte mutations (a crafted program can
// crash LibTorch's compiler, which is why the server loads archives in a child first).
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "model/grail/grail_model.h"
#include "tests/testing/archive_surgery.h"

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace {

// A file of this process's in the temporary directory ($TMPDIR; bench/fuzz.sh gives each
// run its own).
std::string ScratchPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() / (name + "." + std::to_string(getpid())))
      .string();
}

bool IsCode(const std::string& name) { return name.find("/code/") != std::string::npos; }

// One structural mutation of the archive in data[0, size); 0 if it is not one.
size_t MutateStructure(uint8_t* data, size_t size, size_t max_size, unsigned seed) {
  const std::string path = ScratchPath("grail_model_archive_mutator");
  struct RemovedOnReturn {
    const std::string& path;
    ~RemovedOnReturn() { std::remove(path.c_str()); }
  } removed_on_return{path};
  {
    std::FILE* file = std::fopen(path.c_str(), "wb");
    if (file == nullptr) return 0;
    std::fwrite(data, 1, size, file);
    std::fclose(file);
  }
  std::vector<grail::ArchiveEntry> entries = grail::ReadArchiveEntries(path);
  std::vector<size_t> eligible;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (!IsCode(entries[i].name)) eligible.push_back(i);
  }
  if (eligible.empty()) return 0;
  grail::ArchiveEntry& entry = entries[eligible[seed % eligible.size()]];
  switch ((seed / 7) % 4) {
    case 0:  // cut short
      entry.data.resize(entry.data.empty() ? 0 : (seed / 31) % entry.data.size());
      break;
    case 1:  // grown
      entry.data.append(1 + (seed / 31) % 64, static_cast<char>(seed));
      break;
    case 2: {  // swapped with another
      grail::ArchiveEntry& other = entries[eligible[(seed / 31) % eligible.size()]];
      std::swap(entry.data, other.data);
      break;
    }
    default: {  // bytes changed inside it
      if (entry.data.empty()) return 0;
      std::string bytes = entry.data;
      bytes.resize(bytes.size() + 64);
      const size_t n = LLVMFuzzerMutate(reinterpret_cast<uint8_t*>(bytes.data()), entry.data.size(),
                                        bytes.size());
      bytes.resize(n);
      entry.data = bytes;
    }
  }
  if (!grail::WriteArchiveEntries(path, entries)) return 0;
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) return 0;
  const size_t written = std::fread(data, 1, max_size, file);
  const bool whole = std::fgetc(file) == EOF;
  std::fclose(file);
  return whole ? written : 0;
}

}  // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size,
                                          unsigned int seed) {
  if (seed % 2 == 0) {
    if (const size_t n = MutateStructure(data, size, max_size, seed / 2); n > 0) return n;
  }
  return LLVMFuzzerMutate(data, size, max_size);
}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* seed = std::getenv("GRAIL_FUZZ_WRITE_SEED")) {
    grail::GrailConfig config;
    config.hops = 2;
    config.dim = 8;
    absl::StatusOr<std::unique_ptr<grail::GrailModel>> model =
        grail::GrailModel::Create(config, {"r0", "r1"}, /*seed=*/1);
    FUZZ_CHECK(model.ok());
    const absl::Status saved = (*model)->Save(seed);
    if (!saved.ok()) std::fprintf(stderr, "%s\n", saved.ToString().c_str());
    std::exit(saved.ok() ? 0 : 1);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = ScratchPath("grail_model_archive_fuzzer");
  std::FILE* file = std::fopen(path.c_str(), "wb");
  FUZZ_CHECK(file != nullptr);
  FUZZ_CHECK(std::fwrite(data, 1, size, file) == size);
  std::fclose(file);
  absl::StatusOr<std::unique_ptr<grail::GrailModel>> model = grail::GrailModel::Load(path);
  if (!model.ok()) {
    FUZZ_CHECK(model.status().message().find(path) != std::string::npos);
  }
  std::remove(path.c_str());
  return 0;
}
