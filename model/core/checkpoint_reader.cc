#include "model/core/checkpoint_reader.h"

#include <caffe2/serialize/inline_container.h>

#include <map>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "model/core/archive_check.h"
#include "model/core/archive_probe.h"
#include "model/core/pickle.h"

namespace grail {
namespace {

using Kind = PickleValue::Kind;

constexpr absl::string_view kRebuildTensor = "torch._utils _rebuild_tensor_v2";
constexpr absl::string_view kRebuildParameter = "torch._utils _rebuild_parameter";
constexpr absl::string_view kOrderedDict = "collections OrderedDict";

// What a call names, or "" if the callable is not a global.
absl::string_view Callee(const PickleValue& call) {
  if (call.items.size() != 2 || !call.items[0]->is(Kind::kGlobal)) return "";
  return call.items[0]->text;
}

// Refuses every global a checkpoint of tensors does not need, wherever it appears.
absl::Status CheckOnlyData(const std::string& path, const PickleValuePtr& root) {
  return VisitPickle(root, [&](const PickleValue& v) -> absl::Status {
    if (v.is(Kind::kObject)) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": it builds an object of ", v.items[0]->text,
                       ", which a checkpoint of tensors does not need "
                       "(refused: no pickled code runs here)"));
    }
    if (!v.is(Kind::kCall)) return absl::OkStatus();
    const absl::string_view callee = Callee(v);
    if (callee == kRebuildTensor || callee == kRebuildParameter || callee == kOrderedDict) {
      return absl::OkStatus();
    }
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": it calls ", callee.empty() ? "something not a global" : callee,
                     ", which a checkpoint of tensors does not need "
                     "(refused: no pickled code runs here)"));
  });
}

torch::Dtype DtypeOf(const PickleStorageType& type) {
  static const std::map<std::string, torch::Dtype> kTypes = {
      {"Float", torch::kFloat},       {"Double", torch::kDouble}, {"Half", torch::kHalf},
      {"BFloat16", torch::kBFloat16}, {"Long", torch::kLong},     {"Int", torch::kInt},
      {"Short", torch::kShort},       {"Char", torch::kChar},     {"Byte", torch::kByte},
      {"Bool", torch::kBool}};
  return kTypes.at(type.scalar);
}

class TensorCollector {
 public:
  TensorCollector(const std::string& path, caffe2::serialize::PyTorchStreamReader& zip)
      : path_(path), zip_(zip) {}

  // Every tensor at a string-keyed dictionary entry below `v`, by its key path.
  absl::Status Collect(const PickleValue& v, const std::string& prefix, int depth,
                       std::map<std::string, torch::Tensor>* out) {
    if (depth > kMaxPickleDepth) return Error("dictionaries nest too deep");
    const absl::string_view callee = v.is(Kind::kCall) ? Callee(v) : "";
    if (callee == kRebuildTensor || callee == kRebuildParameter) {
      absl::StatusOr<torch::Tensor> tensor = Tensor(v, 0);
      if (!tensor.ok()) return tensor.status();
      (*out)[prefix] = *std::move(tensor);
      return absl::OkStatus();
    }
    if (!v.is(Kind::kDict) && callee != kOrderedDict) return absl::OkStatus();
    if (!dicts_.insert(&v).second) return absl::OkStatus();
    for (const auto& [key, value] : v.entries) {
      if (!key->is(Kind::kString)) continue;
      const std::string name = prefix.empty() ? key->text : prefix + "/" + key->text;
      if (absl::Status s = Collect(*value, name, depth + 1, out); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

 private:
  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat(path_, ": ", what));
  }

  absl::StatusOr<torch::Tensor> Tensor(const PickleValue& call, int depth) {
    const std::vector<PickleValuePtr>& args = call.items[1]->items;
    if (Callee(call) == kRebuildParameter) {
      if (args.empty() || !args[0]->is(Kind::kCall) || depth > 0) {
        return Error("a parameter that is not a tensor");
      }
      return Tensor(*args[0], depth + 1);
    }
    if (Callee(call) != kRebuildTensor || args.empty() || !args[0]->is(Kind::kPersistent)) {
      return Error("a tensor that is not rebuilt from a storage");
    }
    absl::StatusOr<PickleStorage> storage = StorageOf(*args[0]->items[0]);
    if (!storage.ok()) return Error(storage.status().message());
    absl::StatusOr<PickleTensorView> view = TensorViewOf(args, storage->elements);
    if (!view.ok())
      return Error(absl::StrCat(view.status().message(), " (record data/", storage->key, ")"));
    const std::string record = "data/" + storage->key;
    if (!zip_.hasRecord(record)) return Error(absl::StrCat("no record ", record, " for a tensor"));
    auto [data, bytes] = zip_.getRecord(record);
    const int64_t element = storage->type.element_bytes;
    if (static_cast<int64_t>(bytes) != storage->elements * element) {
      return Error(absl::StrCat("record ", record, " holds ", bytes, " bytes where its storage of ",
                                storage->elements, " elements needs ",
                                storage->elements * element));
    }
    const torch::Tensor all = torch::from_blob(
        data.get(), {storage->elements}, torch::TensorOptions().dtype(DtypeOf(storage->type)));
    return all.as_strided(view->size, view->stride, view->offset).clone();
  }

  const std::string& path_;
  caffe2::serialize::PyTorchStreamReader& zip_;
  std::set<const PickleValue*> dicts_;
};

}  // namespace

absl::StatusOr<std::map<std::string, torch::Tensor>> ReadCheckpointTensorsFromBytes(
    absl::string_view bytes, const std::string& path) {
  // LibTorch's reader checks no CRC-32: a damaged record would be read as weights.
  if (absl::Status container = CheckZipArchiveBytes(bytes, path); !container.ok()) {
    return container;
  }
  try {
    ByteViewStream in(bytes);
    caffe2::serialize::PyTorchStreamReader zip(&in);
    if (!zip.hasRecord("data.pkl")) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, " has no data.pkl: not a torch.save file"));
    }
    auto [pickle, size] = zip.getRecord("data.pkl");
    absl::StatusOr<PickleValuePtr> root =
        ParsePickle(absl::string_view(static_cast<const char*>(pickle.get()), size), path);
    if (!root.ok()) return root.status();
    if (absl::Status s = CheckOnlyData(path, *root); !s.ok()) return s;
    std::map<std::string, torch::Tensor> tensors;
    TensorCollector collector(path, zip);
    if (absl::Status s = collector.Collect(**root, "", 0, &tensors); !s.ok()) return s;
    return tensors;
  } catch (const c10::Error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read ", path, " as a torch.save file: ", e.what_without_backtrace()));
  }
}

absl::StatusOr<std::map<std::string, torch::Tensor>> ReadCheckpointTensors(
    const std::string& path) {
  absl::StatusOr<ModelBytes> bytes = ReadModelFile(path);
  if (!bytes.ok()) return bytes.status();
  if (absl::Status probe = ProbeInChildProcess(ArchiveKind::kCheckpoint, *bytes, path);
      !probe.ok()) {
    return probe;
  }
  return ReadCheckpointTensorsFromBytes(bytes->view(), path);
}

}  // namespace grail
