#include "model/families.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "model/core/torch_util.h"
#include "model/grail/grail_module.h"
#include "model/kge/kge_module.h"
#include "model/path/path_module.h"

namespace grail {

absl::StatusOr<AnyModel> LoadAnyModel(const std::string& path, absl::string_view device_name) {
  absl::StatusOr<torch::Device> device = ParseDevice(device_name);
  if (!device.ok()) return device.status();
  absl::StatusOr<torch::jit::Module> m = LoadModelArchive(path, *device);
  if (!m.ok()) return m.status();
  const std::string format = ArchiveFormat(*m);
  AnyModel any;
  if (format == kModelFormat) {
    absl::StatusOr<std::unique_ptr<GrailModel>> grail = GrailModel::FromModule(
        std::make_unique<GrailModule>(GrailModule{*std::move(m), *device}), path, device_name);
    if (!grail.ok()) return grail.status();
    any.grail = *std::move(grail);
  } else if (format == kPathModelFormat || format == kPathModelFormatPerEdge ||
             format == kUltraModelFormat) {
    absl::StatusOr<std::unique_ptr<PathModel>> model = PathModel::FromModule(
        std::make_unique<PathModule>(PathModule{*std::move(m), *device}), path, device_name);
    if (!model.ok()) return model.status();
    any.path = *std::move(model);
  } else if (format == kKgeModelFormat) {
    absl::StatusOr<std::unique_ptr<KgeModel>> model = KgeModel::FromModule(
        std::make_unique<KgeModule>(KgeModule{*std::move(m), *device}), path, device_name);
    if (!model.ok()) return model.status();
    any.kge = *std::move(model);
  } else if (format == kFusedModelFormat) {
    // Its members load as their families do; opened once more, whole.
    absl::StatusOr<std::unique_ptr<FusedModel>> model = FusedModel::Load(path, device_name);
    if (!model.ok()) return model.status();
    any.fused = *std::move(model);
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        path, " is not a ", kModelFormat, ", ", kPathModelFormat, ", ", kUltraModelFormat, ", ",
        kKgeModelFormat, " or ", kFusedModelFormat, " archive"));
  }
  return any;
}

}  // namespace grail
