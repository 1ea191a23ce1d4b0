// Reads the tensors of a PyTorch checkpoint (a torch.save zip file) without running any of
// its pickled code: a restricted unpickler that knows dictionaries, lists, tuples, numbers,
// strings and tensors (torch._utils._rebuild_tensor_v2 over typed storages), and refuses any
// other global by name. LibTorch's own C++ unpickler cannot read every torch.save file (a
// state dict's `_metadata` attribute stops it), and Python's would run whatever the file names.
#ifndef GRAIL_MODEL_CORE_CHECKPOINT_READER_H_
#define GRAIL_MODEL_CORE_CHECKPOINT_READER_H_

#include <torch/torch.h>

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace grail {

// Every tensor of the checkpoint at `path` whose place in it is a string-keyed dictionary
// entry, by its key path joined with "/" ("model/entity_model.mlp.0.weight"), on the CPU as
// float tensors of their saved shape. Errors: INVALID_ARGUMENT naming what the file holds
// that is not data (a global other than the known ones), an opcode this reader does not know,
// or a tensor whose storage record is shorter than its shape needs.
// The file is read and probed as model/core/archive_probe.h says (regular, bounded, in a child
// process first where the program isolates loads).
absl::StatusOr<std::map<std::string, torch::Tensor>> ReadCheckpointTensors(const std::string& path);
// The same from the file's bytes, in this process.
absl::StatusOr<std::map<std::string, torch::Tensor>> ReadCheckpointTensorsFromBytes(
    absl::string_view bytes, const std::string& path);

}  // namespace grail

#endif  // GRAIL_MODEL_CORE_CHECKPOINT_READER_H_
