// libFuzzer target: GrailModel::Load on hostile archives. Whatever the bytes, Load returns
// a model or an error naming the path; it must not crash, hang or leak. Seed it with a real
// archive (bench/fuzz.sh writes one) so that mutations reach past the zip container into the
// TorchScript code, the pickled constants and this project's own checks (format, config,
// relation names, tensor shapes, non-finite weights). With GRAIL_FUZZ_WRITE_SEED=PATH the
// binary writes such an archive (an untrained two-relation model) to PATH and exits.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "fuzz/fuzz_check.h"
#include "model/grail_model.h"

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
  static const std::string path = "/tmp/grail_model_archive_fuzzer." + std::to_string(getpid());
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
