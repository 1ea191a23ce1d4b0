// grail-train: trains GraIL on a triple file and exports the TorchScript model.
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_format.h"
#include "common/command_line.h"
#include "model/tools/training_progress.h"
#include "model/trainer.h"
#include "storage/triple_file.h"

ABSL_FLAG(std::string, train, "", "training graph (triple file); its facts are the positives");
ABSL_FLAG(std::string, valid, "", "validation facts (triple file), scored for AUC-PR");
ABSL_FLAG(std::string, out, "", "where to write the model (TorchScript archive, .pt)");
ABSL_FLAG(int, epochs, 50, "training epochs");
ABSL_FLAG(uint64_t, seed, 0, "seed for initialisation, negatives and order");
ABSL_FLAG(int, hops, 3, "k: subgraph radius and label range");
ABSL_FLAG(int, max_nodes_per_hop, 0, "cap on newly reached nodes per hop (0: none)");
ABSL_FLAG(int, threads, 2, "threads: one extracts subgraphs, the rest compute");
ABSL_FLAG(bool, no_attention, false, "ablation: no edge attention");
ABSL_FLAG(bool, no_labels, false, "ablation: constant node labels (1, 1)");
ABSL_FLAG(bool, no_enclosing, false, "ablation: k-hop union instead of the enclosing subgraph");
ABSL_FLAG(bool, exclude_target_edge, false,
          "extract each positive's subgraph without the fact itself (re-added as target edge)");
ABSL_FLAG(int, batch_size, 16, "positives per step");
ABSL_FLAG(double, lr, 0.01, "Adam learning rate");
ABSL_FLAG(double, l2, 5e-4, "L2 weight decay");
ABSL_FLAG(double, margin, 10, "margin of the ranking loss");
ABSL_FLAG(double, clip, 1000, "gradient-norm clip");
ABSL_FLAG(int, eval_every, 3, "epochs between valid evaluations");
ABSL_FLAG(int, layers, 3, "GNN layers");
ABSL_FLAG(int, dim, 32, "hidden size of every layer");
ABSL_FLAG(int, bases, 4, "R-GCN bases");
ABSL_FLAG(double, edge_dropout, 0.5, "edge dropout at training time");
ABSL_FLAG(bool, zero_without_in_edges, false,
          "a node with no in-edge in its subgraph has state 0 (the reference code's DGL "
          "behaviour) instead of ReLU(W_self h)");
ABSL_FLAG(std::string, device, "cpu", "cpu or cuda[:N]");
ABSL_FLAG(std::string, plot, "",
          "after training, draw loss and valid AUC-PR per epoch into this PNG (gnuplot)");
ABSL_FLAG(bool, progress, true,
          "on a terminal, a progress bar with steps/s and ETA within each epoch (plain epoch "
          "lines when stderr is not a terminal)");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "grail-train --train FILE --valid FILE --out MODEL.pt [--epochs N] [--seed S] [--hops K]\n"
      "  [--threads T] [--no-attention] [--no-labels] [--no-enclosing] [--exclude-target-edge]");
  grail::ParseCommandLine(argc, argv);
  grail::KeepFreedMemoryForReuse();
  const std::string train_path = absl::GetFlag(FLAGS_train);
  const std::string valid_path = absl::GetFlag(FLAGS_valid);
  const std::string out = absl::GetFlag(FLAGS_out);
  if (train_path.empty() || out.empty()) {
    std::fprintf(stderr, "grail-train needs --train and --out (see --help)\n");
    return 2;
  }
  absl::StatusOr<std::vector<grail::NamedTriple>> train = grail::ReadTripleFile(train_path);
  if (!train.ok()) {
    std::fprintf(stderr, "%s\n", train.status().ToString().c_str());
    return 1;
  }
  std::vector<grail::NamedTriple> valid;
  if (!valid_path.empty()) {
    absl::StatusOr<std::vector<grail::NamedTriple>> read = grail::ReadTripleFile(valid_path);
    if (!read.ok()) {
      std::fprintf(stderr, "%s\n", read.status().ToString().c_str());
      return 1;
    }
    valid = *std::move(read);
  }
  grail::IndexedTriples indexed;
  grail::IndexTriples(*train, &indexed);

  grail::TrainOptions options;
  options.model.hops = absl::GetFlag(FLAGS_hops);
  options.model.max_nodes_per_hop = absl::GetFlag(FLAGS_max_nodes_per_hop);
  options.model.enclosing = !absl::GetFlag(FLAGS_no_enclosing);
  options.model.node_labels = !absl::GetFlag(FLAGS_no_labels);
  options.model.attention = !absl::GetFlag(FLAGS_no_attention);
  options.model.num_layers = absl::GetFlag(FLAGS_layers);
  options.model.dim = absl::GetFlag(FLAGS_dim);
  options.model.num_bases = absl::GetFlag(FLAGS_bases);
  options.model.edge_dropout = absl::GetFlag(FLAGS_edge_dropout);
  options.model.zero_without_in_edges = absl::GetFlag(FLAGS_zero_without_in_edges);
  options.epochs = absl::GetFlag(FLAGS_epochs);
  options.batch_size = absl::GetFlag(FLAGS_batch_size);
  options.learning_rate = absl::GetFlag(FLAGS_lr);
  options.l2 = absl::GetFlag(FLAGS_l2);
  options.margin = absl::GetFlag(FLAGS_margin);
  options.clip_norm = absl::GetFlag(FLAGS_clip);
  options.eval_every = absl::GetFlag(FLAGS_eval_every);
  options.seed = absl::GetFlag(FLAGS_seed);
  options.exclude_target_edge = absl::GetFlag(FLAGS_exclude_target_edge);
  options.threads = absl::GetFlag(FLAGS_threads);
  options.device = absl::GetFlag(FLAGS_device);

  std::fprintf(stderr,
               "grail-train: %u entities, %u relations, %zu facts; %zu valid facts; seed %llu\n",
               indexed.entities.size(), indexed.relations.size(), indexed.triples.size(),
               valid.size(), static_cast<unsigned long long>(options.seed));
  if (!absl::GetFlag(FLAGS_plot).empty()) {
    if (absl::Status s = grail::CheckPlotter(); !s.ok()) {  // before hours of training
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return 2;
    }
  }
  const bool bar = absl::GetFlag(FLAGS_progress) && isatty(fileno(stderr));
  grail::ProgressBar progress(stderr, options.epochs);
  std::vector<grail::EpochReport> history;
  auto report = [&](const grail::EpochReport& r) {
    progress.Clear();
    history.push_back(r);
    std::string valid_text =
        r.valid_auc_pr
            ? absl::StrFormat("  valid_auc_pr %.4f%s", *r.valid_auc_pr, r.best ? " (best)" : "")
            : "";
    std::fprintf(stderr, "epoch %d/%d  loss %.4f%s  %.1f s\n", r.epoch, options.epochs, r.loss,
                 valid_text.c_str(), r.seconds);
  };
  auto step = [&progress](const grail::StepReport& s) { progress.Step(s); };
  absl::StatusOr<std::unique_ptr<grail::GrailModel>> model =
      bar ? grail::TrainGrail(indexed, valid, options, report, step)
          : grail::TrainGrail(indexed, valid, options, report);
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", model.status().ToString().c_str());
    return 1;
  }
  (*model)->set_training_fingerprint(grail::FingerprintFacts(*train));
  if (absl::Status s = (*model)->Save(out); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  std::fprintf(stderr, "saved %s (%lld parameters)\n", out.c_str(),
               static_cast<long long>((*model)->num_parameters()));
  if (const std::string plot = absl::GetFlag(FLAGS_plot); !plot.empty()) {
    if (absl::Status s = grail::PlotTraining(history, plot); !s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return 1;
    }
    std::fprintf(stderr, "plotted %s\n", plot.c_str());
  }
  return 0;
}
