#include "model/families.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "model/core/model_archive.h"
#include "model/grail/grail_module.h"
#include "model/kge/kge_module.h"
#include "model/path/path_module.h"
#include "model/ultra/ultra_network.h"

namespace grail {
namespace {

// The path model's network whose archives have `format`, or null: one model class, whichever
// network it runs.
const PathNetworkDefinition* PathNetworkReading(const std::string& format) {
  for (const PathNetworkDefinition* network : {&PathNetworks(), &UltraNetwork()}) {
    if (network->Reads(format)) return network;
  }
  return nullptr;
}

}  // namespace

absl::StatusOr<AnyModel> LoadAnyModel(const std::string& path, absl::string_view device_name) {
  absl::StatusOr<OpenedArchive> opened = OpenArchive(path, device_name);
  if (!opened.ok()) return opened.status();
  const std::string format = ArchiveFormat(opened->module);
  AnyModel any;
  if (format == kGrailModelFormat) {
    absl::StatusOr<std::unique_ptr<GrailModel>> model =
        ModelFromArchive<GrailModel, GrailModule>(*std::move(opened), path, device_name);
    if (!model.ok()) return model.status();
    any.grail = *std::move(model);
  } else if (const PathNetworkDefinition* network = PathNetworkReading(format)) {
    absl::StatusOr<std::unique_ptr<PathModel>> model =
        ModelFromArchive<PathModel, PathModule>(*std::move(opened), path, device_name, network);
    if (!model.ok()) return model.status();
    any.path = *std::move(model);
  } else if (format == kKgeModelFormat) {
    absl::StatusOr<std::unique_ptr<KgeModel>> model =
        ModelFromArchive<KgeModel, KgeModule>(*std::move(opened), path, device_name);
    if (!model.ok()) return model.status();
    any.kge = *std::move(model);
  } else if (format == kFusionModelFormat) {
    // Its members load as their families do.
    absl::StatusOr<std::unique_ptr<FusionModel>> model =
        FusionModel::FromArchive(*opened, path, device_name);
    if (!model.ok()) return model.status();
    any.fusion = *std::move(model);
  } else if (format == kEnsembleModelFormat) {
    // Its members load as path models with their own networks.
    absl::StatusOr<std::unique_ptr<EnsembleModel>> model =
        EnsembleModel::FromArchive(*opened, path, device_name, PathNetworkReading);
    if (!model.ok()) return model.status();
    any.ensemble = *std::move(model);
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        path, " is not a ", kGrailModelFormat, ", ", kPathModelFormat, ", ", kUltraModelFormat,
        ", ", kKgeModelFormat, ", ", kFusionModelFormat, " or ", kEnsembleModelFormat, " archive"));
  }
  return any;
}

}  // namespace grail
