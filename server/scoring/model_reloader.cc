#include "server/scoring/model_reloader.h"

#include <algorithm>
#include <chrono>
#include <future>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/elapsed.h"
#include "model/core/archive_probe.h"
#include "server/scoring/scoring_jobs.h"

namespace grail {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

absl::Status WarmUpServingPath(const LinkPredictor& predictor, int calls, int batch_size) {
  const std::shared_ptr<const GraphSnapshot> graph = predictor.store().Snapshot();
  std::vector<NamedTriple> facts;
  const ServedModel& served = *predictor.served_model();
  const size_t count =
      served.family().ServingWarmUpFacts(static_cast<size_t>(std::max(1, batch_size)));
  for (const Triple& t : SampleStoredFacts(served, *graph, count, /*seed=*/2)) {
    facts.push_back(
        {graph->EntityName(t.head), graph->RelationName(t.relation), graph->EntityName(t.tail)});
  }
  if (facts.empty()) return absl::OkStatus();
  for (int c = 0; c < calls; ++c) {
    const size_t size = c % 2 == 0 ? 1 : facts.size();
    std::promise<absl::Status> done;
    predictor.Score(std::vector<NamedTriple>(facts.begin(), facts.begin() + size),
                    std::make_shared<CallControl>(), [&done](absl::StatusOr<ScoredFacts> scored) {
                      done.set_value(scored.status());
                    });
    if (absl::Status status = done.get_future().get(); !status.ok()) return status;
  }
  return absl::OkStatus();
}

ModelReloader::ModelReloader(LinkPredictor& predictor, ReloadOptions options, Observer observer)
    : predictor_(predictor), options_(std::move(options)), observer_(std::move(observer)) {}

absl::StatusOr<ReloadOutcome> ModelReloader::Reload(const std::string& requested,
                                                    const std::function<bool()>& still_wanted) {
  return Reload(requested, still_wanted, Queue());
}

absl::StatusOr<ReloadOutcome> ModelReloader::Reload(const std::string& requested,
                                                    const std::function<bool()>& still_wanted,
                                                    uint64_t request) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string path = requested.empty() ? options_.default_path : requested;
  const std::shared_ptr<const ServedModel> previous = predictor_.served_model();
  // Whether the reload should go on: the server is not stopping and its caller still waits.
  auto wanted = [&] { return !cancelled_.load() && (!still_wanted || still_wanted()); };
  auto gone = [&](absl::string_view stage) -> absl::Status {
    if (cancelled_.load()) {
      return absl::CancelledError(
          absl::StrCat("reload of ", path, " not applied: the server is stopping"));
    }
    if (wanted()) return absl::OkStatus();
    return absl::DeadlineExceededError(
        absl::StrCat("reload of ", path,
                     " not applied: the caller's deadline passed or it "
                     "cancelled ",
                     stage, "; the previous model keeps serving"));
  };
  auto attempt = [&]() -> absl::StatusOr<ReloadOutcome> {
    if (request != newest_request_.load()) {
      return absl::AbortedError(
          absl::StrCat("reload of ", path,
                       " not applied: a newer reload was asked for while it waited; "
                       "only the newest of waiting reloads runs"));
    }
    if (absl::Status s = gone("while it waited"); !s.ok()) return s;
    ReloadOutcome outcome;
    outcome.previous_version = previous->version();
    const Clock::time_point load_start = Clock::now();
    absl::StatusOr<std::shared_ptr<const ServedModel>> loaded;
    {
      // The child's load stops if the caller goes or the server stops.
      const ArchiveLoadScope scope(wanted);
      loaded = LoadServedModel(path, options_.device, previous->generation() + 1);
    }
    if (!loaded.ok()) return loaded.status();
    outcome.model = *std::move(loaded);
    outcome.load_seconds = SecondsSince(load_start);
    TripleStore& store = predictor_.store();
    if (outcome.model->reads_relation_graph() && !store.tracks_relation_sides()) {
      // A model of any relation reads which relation sides meet: counted now (writers wait
      // meanwhile), and kept while such a model serves.
      const Clock::time_point count_start = Clock::now();
      store.TrackRelationSides(true);
      outcome.relation_sides_seconds = SecondsSince(count_start);
    }
    if (absl::Status fits = CheckRelationGraphFits(*outcome.model, *store.Snapshot(),
                                                   options_.max_relation_side_pairs);
        !fits.ok()) {
      return fits;
    }
    const Clock::time_point warmup_start = Clock::now();
    WarmupOptions warmup = options_.warmup;
    warmup.stop = [&] { return !wanted(); };
    const absl::StatusOr<int> warm = WarmUp(*outcome.model, *store.Snapshot(), warmup);
    if (absl::Status s = gone("before the model was ready"); !s.ok()) return s;
    if (!warm.ok()) return warm.status();
    outcome.warmup_forwards = *warm;
    outcome.warmup_seconds = SecondsSince(warmup_start);
    if (outcome.model->open_vocabulary()) {
      store.AllowAnyRelation();
    } else if (!options_.allow_unknown_relations) {
      const absl::Status allowed = store.SetAllowedRelations(outcome.model->relations());
      if (!allowed.ok()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "model ", path, " cannot serve the stored graph: ", allowed.message(),
            "; serve a model trained with them, or run with --allow-unknown-relations"));
      }
    }
    predictor_.SetModel(outcome.model);
    return outcome;
  };
  absl::StatusOr<ReloadOutcome> outcome = attempt();
  // The model serving now, the new one or the one kept, decides whether the store goes on
  // following relation sides: a learned model's chunks skip that work.
  TripleStore& store = predictor_.store();
  const bool read = predictor_.served_model()->reads_relation_graph();
  if (store.tracks_relation_sides() != read) store.TrackRelationSides(read);
  if (observer_) observer_(outcome);
  return outcome;
}

}  // namespace grail
