// Model archives: the one loader every family opens its archives through (checked, probed in
// a child where the program isolates loads, digests verified), and saving them durably with
// their digests. How a file from outside is read and probed is model/core/archive_probe.h;
// what is checked before LibTorch reads a byte, model/core/archive_check.h. Includes LibTorch:
// only model code includes it.
#ifndef GRAIL_MODEL_CORE_MODEL_ARCHIVE_H_
#define GRAIL_MODEL_CORE_MODEL_ARCHIVE_H_

#include <torch/script.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace grail {

// Opens a model archive: reads the file (model/core/archive_probe.h: regular files, bounded),
// checks its container and tensor records (model/core/archive_check.h: LibTorch trusts them and
// can crash on damaged ones), loads it in a child process first where this program
// isolates loads, then loads the TorchScript module on `device` and checks its tensors
// against the digests its trainer wrote. Errors name the path: "PATH is damaged: ...",
// "cannot load model PATH: ...", and those of ReadModelFile / ProbeInChildProcess.
absl::StatusOr<torch::jit::Module> LoadModelArchive(const std::string& path,
                                                    const torch::Device& device);
// An archive opened on a device, before any family has read it.
struct OpenedArchive {
  torch::jit::Module module;
  torch::Device device;
};
// The one loader skeleton: parses `device`, then LoadModelArchive. Every family's Load() and
// LoadAnyModel (model/families.h) open archives through it.
absl::StatusOr<OpenedArchive> OpenArchive(const std::string& path, absl::string_view device);
// An opened archive handed to a family's Model::FromModule as its Module (the family's
// TorchScript holder: {module, device}), which checks its format, config and parameters;
// `more` goes to FromModule after them (the path model's network).
template <typename Model, typename Module, typename... More>
absl::StatusOr<std::unique_ptr<Model>> ModelFromArchive(OpenedArchive opened,
                                                        const std::string& path,
                                                        absl::string_view device, More... more) {
  return Model::FromModule(
      std::make_unique<Module>(Module{std::move(opened.module), opened.device}), path, device,
      more...);
}
// A family's Load(): OpenArchive, then ModelFromArchive.
template <typename Model, typename Module>
absl::StatusOr<std::unique_ptr<Model>> LoadArchiveAs(const std::string& path,
                                                     absl::string_view device) {
  absl::StatusOr<OpenedArchive> opened = OpenArchive(path, device);
  if (!opened.ok()) return opened.status();
  return ModelFromArchive<Model, Module>(*std::move(opened), path, device);
}
// The same from the file's bytes, in this process (no probe): what the probe itself runs.
absl::StatusOr<torch::jit::Module> LoadModelArchiveBytes(absl::string_view bytes,
                                                         const std::string& path,
                                                         const torch::Device& device);
// The archive's "format" attribute ("" if it has none).
std::string ArchiveFormat(const torch::jit::Module& module);
// The archive's relation vocabulary, in the model's id order.
std::vector<std::string> ArchiveRelations(const torch::jit::Module& module);
// Writes `module` to `path` as common/durable_file.h does: under a temporary name, synced,
// then renamed over `path` (a symbolic link: its target), so a server reloading `path` meanwhile
// reads the old archive or the new one, and a failed or interrupted save leaves the old one.
absl::Status SaveModule(torch::jit::Module& module, const std::string& path);
// SaveModule with `fingerprint` as the module's training_fingerprint attribute and the
// SHA-256 of every tensor it holds as its parameter_digests attribute.
absl::Status SaveModelArchive(torch::jit::Module& module, const std::string& fingerprint,
                              const std::string& path);
// Number of scalars in the module's parameters.
int64_t CountParameters(const torch::jit::Module& module);

// INVALID_ARGUMENT naming the first parameter of `module` holding a NaN or Inf: the training
// diverged or the archive is damaged, and such a model would rank arbitrarily.
absl::Status CheckFiniteParameters(const torch::jit::Module& module, const std::string& path);

}  // namespace grail

#endif  // GRAIL_MODEL_CORE_MODEL_ARCHIVE_H_
