// The model families, and loading an archive of any of them.
//
// This is the one place that lists every family; each lives in its own folder (model/grail,
// model/path, model/ultra, model/kge, model/fusion, model/ensemble) and none includes another's,
// but for three compositions: fusion combines GraIL and KGE members, ULTRA runs the path model
// with a network of its own, and an ensemble combines path models (ULTRA's included) and GraIL
// models. It sits above the families rather than in model/core, which they are all built on.
#ifndef GRAIL_MODEL_FAMILIES_H_
#define GRAIL_MODEL_FAMILIES_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/ensemble/ensemble_model.h"
#include "model/fusion/fusion_model.h"
#include "model/grail/grail_model.h"
#include "model/kge/kge_model.h"
#include "model/path/path_model.h"
#include "model/ultra/ultra_model.h"

namespace grail {

enum class ModelFamily { kGrail, kPath, kKge, kFusion, kEnsemble };

// A model archive of any family: exactly one of the five is set (ULTRA's are path models).
struct AnyModel {
  std::unique_ptr<GrailModel> grail;
  std::unique_ptr<PathModel> path;
  std::unique_ptr<KgeModel> kge;
  std::unique_ptr<FusionModel> fusion;
  std::unique_ptr<EnsembleModel> ensemble;

  ModelFamily family() const {
    return path       ? ModelFamily::kPath
           : kge      ? ModelFamily::kKge
           : fusion   ? ModelFamily::kFusion
           : ensemble ? ModelFamily::kEnsemble
                      : ModelFamily::kGrail;
  }
};

// Opens the archive at `path` once and loads it as the family its format names. Errors name
// the path: a damaged archive, one of no family, or what the family's loader refuses.
absl::StatusOr<AnyModel> LoadAnyModel(const std::string& path, absl::string_view device = "cpu");

}  // namespace grail

#endif  // GRAIL_MODEL_FAMILIES_H_
