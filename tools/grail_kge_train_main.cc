// grail-kge-train: trains a knowledge-graph embedding model (TransE, DistMult, ComplEx or
// RotatE) with the RotatE paper's recipe and exports it as a TorchScript archive that
// grail-eval reads like the other families'.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_split.h"
#include "common/command_line.h"
#include "common/durable_file.h"
#include "graph/triple_file.h"
#include "model/core/blas_kernels.h"
#include "model/core/runtime.h"
#include "tools/training_progress.h"
#include "train/grail_trainer.h"
#include "train/kge_trainer.h"

ABSL_FLAG(std::string, model, "", "transe, distmult, complex or rotate");
ABSL_FLAG(std::string, train, "", "training facts (triple file)");
ABSL_FLAG(std::string, valid, "", "validation facts (triple file): filtered MRR selects the model");
ABSL_FLAG(std::string, out, "", "where to write the model (TorchScript archive, .pt)");
ABSL_FLAG(std::string, entities_from, "",
          "comma-separated triple files whose entities join the vocabulary without being "
          "trained on (e.g. the test file, as the RotatE code's vocabulary holds every entity "
          "of its splits); --valid's entities always join");
ABSL_FLAG(int, dim, 0, "embedding size, complex entries for complex and rotate (0: the recipe's)");
ABSL_FLAG(double, gamma, 0, "margin of transe and rotate (0: the recipe's)");
ABSL_FLAG(int, epochs, 100, "training epochs");
ABSL_FLAG(int, lr_decay_epoch, -1,
          "the learning rate drops tenfold after this epoch (-1: half of --epochs, as the RotatE "
          "code drops it after half of its steps; 0: never)");
ABSL_FLAG(int, batch_size, 512, "facts per step");
ABSL_FLAG(int, negatives, 1024, "filtered negatives per fact");
ABSL_FLAG(double, lr, 0, "Adam learning rate (0: the recipe's)");
ABSL_FLAG(double, regularization, -1, "weight of the L3 penalty (-1: the recipe's)");
ABSL_FLAG(double, adversarial_alpha, 0,
          "self-adversarial weighting of the negatives, softmax(alpha * score): RotatE's alpha "
          "(0: off, as GraIL's paper runs its baselines)");
// The old spelling, refused: grail-train's --adversarial-temperature T divides the scores
// (softmax(score / T), NBFNet's), RotatE's alpha multiplies them; one name meant both.
ABSL_FLAG(double, adversarial_temperature, std::numeric_limits<double>::quiet_NaN(),
          "renamed: see --adversarial_alpha");
ABSL_FLAG(bool, uniform_weight, false,
          "weigh every fact alike instead of the frequency subsampling weights");
ABSL_FLAG(int, eval_every, 10, "epochs between validations (the last epoch is always one)");
ABSL_FLAG(uint64_t, seed, 0, "seed for initialisation, negatives and order");
ABSL_FLAG(int, threads, 2, "LibTorch's compute threads");
ABSL_FLAG(std::string, device, "cpu", "cpu or cuda[:N]");
ABSL_FLAG(std::string, checkpoint_dir, "",
          "write a checkpoint after every epoch into this directory");
ABSL_FLAG(bool, resume, false,
          "continue from the checkpoint in --checkpoint-dir (if it holds one); the run's data "
          "and options must be the checkpoint's");
ABSL_FLAG(bool, progress, true, "on a terminal, a progress bar within each epoch");

namespace {

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "%s\n", status.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  grail::UseFastestBlasKernels(argv);  // before anything else: it may start the program again
  absl::SetProgramUsageMessage(
      "grail-kge-train --model transe|distmult|complex|rotate --train FILE --valid FILE\n"
      "  --out K.pt [--dim D] [--epochs N] [--seed S] [--threads T] [--entities-from FILE]\n"
      "  [--checkpoint-dir DIR [--resume]]");
  grail::ParseCommandLine(argc, argv);
  if (!std::isnan(absl::GetFlag(FLAGS_adversarial_temperature))) {
    std::fprintf(stderr,
                 "grail-kge-train: --adversarial-temperature is now --adversarial-alpha A: "
                 "softmax(A * score), RotatE's alpha (grail-train's --adversarial-temperature T "
                 "divides instead: softmax(score / T))\n");
    return 2;
  }
  grail::KeepFreedMemoryForReuse();
  const std::string out = absl::GetFlag(FLAGS_out);
  if (absl::GetFlag(FLAGS_model).empty() || absl::GetFlag(FLAGS_train).empty() || out.empty()) {
    std::fprintf(stderr, "grail-kge-train needs --model, --train and --out (see --help)\n");
    return 2;
  }
  absl::Status usable = grail::CheckOutputPath(
      "out", out, {{"train", absl::GetFlag(FLAGS_train)}, {"valid", absl::GetFlag(FLAGS_valid)}});
  for (absl::string_view path :
       absl::StrSplit(absl::GetFlag(FLAGS_entities_from), ',', absl::SkipEmpty())) {
    if (usable.ok())
      usable = grail::CheckOutputPath("out", out, {{"entities-from", std::string(path)}});
  }
  if (!usable.ok()) {
    std::fprintf(stderr, "%s\n", std::string(usable.message()).c_str());
    return 2;
  }
  absl::StatusOr<grail::KgeKind> kind = grail::ParseKgeKind(absl::GetFlag(FLAGS_model));
  if (!kind.ok()) {
    std::fprintf(stderr, "%s\n", std::string(kind.status().message()).c_str());
    return 2;
  }
  absl::StatusOr<std::vector<grail::NamedTriple>> train =
      grail::ReadTripleFile(absl::GetFlag(FLAGS_train));
  if (!train.ok()) return Fail(train.status());
  std::vector<grail::NamedTriple> valid;
  if (const std::string path = absl::GetFlag(FLAGS_valid); !path.empty()) {
    absl::StatusOr<std::vector<grail::NamedTriple>> read = grail::ReadTripleFile(path);
    if (!read.ok()) return Fail(read.status());
    valid = *std::move(read);
  }
  grail::IndexedTriples indexed;
  grail::IndexTriples(*train, &indexed);
  // Entities of no training fact get ids after the trained ones; relations only from training.
  std::vector<std::vector<grail::NamedTriple>> extra = {valid};
  for (absl::string_view path :
       absl::StrSplit(absl::GetFlag(FLAGS_entities_from), ',', absl::SkipEmpty())) {
    absl::StatusOr<std::vector<grail::NamedTriple>> read = grail::ReadTripleFile(std::string(path));
    if (!read.ok()) return Fail(read.status());
    extra.push_back(*std::move(read));
  }
  const uint32_t trained_entities = indexed.entities.size();
  for (const auto& facts : extra) {
    for (const grail::NamedTriple& f : facts) {
      indexed.entities.Intern(f.head);
      indexed.entities.Intern(f.tail);
    }
  }

  grail::KgeTrainOptions options = grail::RecipeFor(*kind);
  if (absl::GetFlag(FLAGS_dim) != 0) options.model.dim = absl::GetFlag(FLAGS_dim);
  if (absl::GetFlag(FLAGS_gamma) != 0) options.model.gamma = absl::GetFlag(FLAGS_gamma);
  if (absl::GetFlag(FLAGS_lr) != 0) options.learning_rate = absl::GetFlag(FLAGS_lr);
  if (absl::GetFlag(FLAGS_regularization) >= 0) {
    options.regularization = absl::GetFlag(FLAGS_regularization);
  }
  options.epochs = absl::GetFlag(FLAGS_epochs);
  options.lr_decay_epoch = absl::GetFlag(FLAGS_lr_decay_epoch) >= 0
                               ? absl::GetFlag(FLAGS_lr_decay_epoch)
                               : options.epochs / 2;
  options.batch_size = absl::GetFlag(FLAGS_batch_size);
  options.negatives = absl::GetFlag(FLAGS_negatives);
  options.adversarial_alpha = absl::GetFlag(FLAGS_adversarial_alpha);
  options.subsampling = !absl::GetFlag(FLAGS_uniform_weight);
  options.eval_every = absl::GetFlag(FLAGS_eval_every);
  options.seed = absl::GetFlag(FLAGS_seed);
  options.threads = absl::GetFlag(FLAGS_threads);
  options.device = absl::GetFlag(FLAGS_device);
  options.checkpoint_dir = absl::GetFlag(FLAGS_checkpoint_dir);
  options.resume = absl::GetFlag(FLAGS_resume);
  std::fprintf(stderr,
               "grail-kge-train: %s, dim %d, gamma %g, lr %g, regularization %g; %u entities "
               "(%u in training facts), %u relations, %zu facts; %zu valid facts; seed %llu\n",
               grail::KgeKindName(options.model.kind), options.model.dim, options.model.gamma,
               options.learning_rate, options.regularization, indexed.entities.size(),
               trained_entities, indexed.relations.size(), indexed.triples.size(), valid.size(),
               static_cast<unsigned long long>(options.seed));

  const bool bar = absl::GetFlag(FLAGS_progress) && isatty(fileno(stderr));
  grail::ProgressBar progress(stderr, options.epochs);
  auto report = [&](const grail::EpochReport& r) {
    progress.Clear();
    std::fprintf(stderr, "%s\n", grail::EpochLine(r, options.epochs).c_str());
  };
  std::function<void(const grail::StepReport&)> step;
  if (bar) step = [&progress](const grail::StepReport& s) { progress.Step(s); };
  absl::StatusOr<std::unique_ptr<grail::KgeModel>> model =
      grail::TrainKge(indexed, valid, options, report, step);
  if (!model.ok()) return Fail(model.status());
  (*model)->set_training_fingerprint(grail::FingerprintFacts(*train));
  if (absl::Status saved = (*model)->Save(out); !saved.ok()) return Fail(saved);
  std::fprintf(stderr, "saved %s (%lld parameters)\n", out.c_str(),
               static_cast<long long>((*model)->num_parameters()));
  return 0;
}
