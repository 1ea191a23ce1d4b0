// Replacing the served model while serving (ReloadModel, SIGHUP), and the same steps for
// the model loaded at start: load the archive, check it against the stored graph, warm it
// up, and only then make it the one new calls use.
//
//   1. LoadServedModel: the archive's format and parameters (GrailModel::Load), on the
//      server's device, and its SHA-256 for the version.
//   2. WarmUp: representative forwards (--warmup-batches); a failing forward refuses it.
//   3. The store's allowed relations become the new vocabulary (unless the server accepts
//      unknown relations); refused if the stored graph holds a relation the model lacks.
//   4. LinkPredictor::SetModel: one pointer swap. Calls in flight keep the model they hold.
// Any failure leaves the old model serving, and the store's vocabulary as it was.
//
// Bounded and truthful: the archive is read and first loaded in a child process under the
// size and time bounds of model/core/archive_probe.h; a reload whose caller has gone (deadline
// passed, cancelled) stops and is not applied; of reloads waiting behind the one in progress
// only the newest runs, the others end ABORTED.
//
// Thread safety: Reload() may be called from any thread; reloads run one at a time.
#ifndef GRAIL_SERVER_SCORING_MODEL_RELOADER_H_
#define GRAIL_SERVER_SCORING_MODEL_RELOADER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "server/scoring/link_predictor.h"
#include "server/scoring/served_model.h"

namespace grail {

struct ReloadOutcome {
  std::shared_ptr<const ServedModel> model;  // now serving
  std::string previous_version;
  double load_seconds = 0;
  double warmup_seconds = 0;
  int warmup_forwards = 0;
  // Counting which relation sides meet, when the new model reads them and the store did not
  // follow them (0 otherwise).
  double relation_sides_seconds = 0;
};

struct ReloadOptions {
  std::string default_path;  // the --model path, for a reload without one
  std::string device;
  bool allow_unknown_relations = false;
  // --max-relation-pairs: a model of any relation is refused on a graph past it.
  uint64_t max_relation_side_pairs = 0;
  WarmupOptions warmup;
};

// Scores stored facts through `predictor`'s whole serving path (engine extraction threads,
// batcher, the served model), one call of a single fact and one of a full batch, and waits
// for them: the threads' first extractions and forwards (per-thread scratch, the compute
// pool of the batcher thread) happen here rather than in the first user calls. Up to
// `calls` calls; nothing to do on an empty graph. Returns the calls' first error.
absl::Status WarmUpServingPath(const LinkPredictor& predictor, int calls, int batch_size);

class ModelReloader {
 public:
  // Called after every reload attempt with its outcome (or error); may be empty.
  using Observer = std::function<void(const absl::StatusOr<ReloadOutcome>&)>;

  // `predictor` must outlive the reloader.
  ModelReloader(LinkPredictor& predictor, ReloadOptions options, Observer observer = nullptr);

  // Serves the archive at `path` (empty: options.default_path) from now on, or returns why
  // not, leaving the old model serving. Errors name the path: NOT_FOUND or INVALID_ARGUMENT
  // (not readable, not a regular file, too large, damaged, crashed the loader),
  // FAILED_PRECONDITION (vocabulary), the warm-up forward's error; DEADLINE_EXCEEDED when
  // `still_wanted` (may be empty) returned false before the swap, or the load's time bound
  // passed; ABORTED when a newer reload was asked for while this one waited; CANCELLED when
  // the process is stopping. The model is swapped in only after the last check of
  // `still_wanted`: an error always means the old model still serves.
  absl::StatusOr<ReloadOutcome> Reload(const std::string& path,
                                       const std::function<bool()>& still_wanted = nullptr);
  // The same for a request queued earlier with Queue(): if a newer one was queued since,
  // this one ends ABORTED without loading anything.
  absl::StatusOr<ReloadOutcome> Reload(const std::string& path,
                                       const std::function<bool()>& still_wanted, uint64_t queued);
  // Takes a place in the order of reload requests, for a Reload() that runs later (on
  // another thread).
  uint64_t Queue() { return newest_request_.fetch_add(1) + 1; }
  // The process is stopping: a reload in progress stops at its next step (load, warm-up
  // forward) with CANCELLED, and later ones fail at once. Irreversible.
  void Cancel() { cancelled_.store(true); }

 private:
  LinkPredictor& predictor_;
  const ReloadOptions options_;
  const Observer observer_;
  std::mutex mu_;  // one reload at a time
  std::atomic<uint64_t> newest_request_{0};
  std::atomic<bool> cancelled_{false};
};

}  // namespace grail

#endif  // GRAIL_SERVER_SCORING_MODEL_RELOADER_H_
