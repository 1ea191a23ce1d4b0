// Reading a Python pickle as data, never as code: the opcodes become a tree of values in
// which a global is only its name, a call (REDUCE) or an object construction (NEWOBJ) only
// the callable and its arguments, and a persistent id only the id. Nothing named in the
// pickle is imported or run; what a call means is decided by whoever walks the tree
// (model/core/archive_check.cc checks a TorchScript archive's storages,
// model/core/checkpoint_reader.cc rebuilds a torch.save file's tensors and refuses every other
// global).
//
// No LibTorch here: the archive check runs before LibTorch sees a byte of the file.
#ifndef GRAIL_MODEL_CORE_PICKLE_H_
#define GRAIL_MODEL_CORE_PICKLE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace grail {

struct PickleValue;
using PickleValuePtr = std::shared_ptr<PickleValue>;

struct PickleValue {
  enum class Kind {
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,      // str and bytes
    kTuple,       // items
    kList,        // items
    kDict,        // entries
    kGlobal,      // text: "module name"
    kCall,        // REDUCE: items[0] the callable, items[1] its argument tuple; state (BUILD)
    kObject,      // NEWOBJ: items[0] the class, items[1] its argument tuple; state (BUILD)
    kPersistent,  // BINPERSID: items[0] the id
  };
  Kind kind = Kind::kNone;
  int64_t integer = 0;  // int; bool (0 or 1)
  double real = 0;
  std::string text;
  std::vector<PickleValuePtr> items;
  std::vector<std::pair<PickleValuePtr, PickleValuePtr>> entries;
  PickleValuePtr state;  // set by BUILD on a call or an object (a dict's BUILD is dropped)

  static PickleValuePtr Of(Kind kind) {
    auto v = std::make_shared<PickleValue>();
    v->kind = kind;
    return v;
  }
  bool is(Kind k) const { return kind == k; }
};

// The value `pickle` describes (protocols 2 to 5, the opcodes torch.save and TorchScript
// write). INVALID_ARGUMENT "NAME: why (pickle offset N)" for a malformed pickle or an opcode
// not read here. The tree may share nodes (memo gets); a walker must bound its depth, since a
// malformed pickle can make a list contain itself.
absl::StatusOr<PickleValuePtr> ParsePickle(absl::string_view pickle, absl::string_view name);

// Calls `visit` once for every value reachable from `root` (a shared value once, a parent
// before its children: items, dictionary keys and values, BUILD state), stopping at its first
// error. INVALID_ARGUMENT if values nest deeper than kMaxPickleDepth.
inline constexpr int kMaxPickleDepth = 256;
absl::Status VisitPickle(const PickleValuePtr& root,
                         const std::function<absl::Status(const PickleValue&)>& visit);

// The storage classes tensors are saved with ("torch FloatStorage", ...): the element
// type's name as LibTorch spells it ("Float") and its width in bytes; nullopt otherwise.
struct PickleStorageType {
  std::string scalar;  // c10::ScalarType name: Float, Double, Half, BFloat16, Long, ...
  int element_bytes = 0;
};
std::optional<PickleStorageType> StorageTypeOf(absl::string_view global);

// A persistent id of a tensor storage, ("storage", <storage class>, key, location, numel):
// the storage record's key, its type and its element count.
struct PickleStorage {
  std::string key;
  PickleStorageType type;
  int64_t elements = 0;
};
absl::StatusOr<PickleStorage> StorageOf(const PickleValue& persistent_id);

// The arguments of torch._utils._rebuild_tensor_v2 (storage, offset, size, stride, ...),
// with the view checked to lie inside its storage: offset >= 0, sizes and strides >= 0,
// and the largest element read below `storage_elements`.
struct PickleTensorView {
  int64_t offset = 0;
  std::vector<int64_t> size;
  std::vector<int64_t> stride;
};
absl::StatusOr<PickleTensorView> TensorViewOf(const std::vector<PickleValuePtr>& args,
                                              int64_t storage_elements);

}  // namespace grail

#endif  // GRAIL_MODEL_CORE_PICKLE_H_
