// grail-tune: fine-tunes the served model on the live graph and promotes it only when it ranks
// the newest facts better (docs/operations.md, "Fine-tuning on the live graph").
//
//   grail-tune --target HOST:PORT --work-dir DIR [--reload-target HOST:PORT ...]
//              [--time-budget 1h] [--margin 0.01] [--report FILE] [--dry-run]
//   grail-tune --rollback --target HOST:PORT [--reload-target ...]
//
// One cycle: GetStats names the served archive; ExportTriples writes the graph into DIR; the
// newest facts are held out as the judge (train/challenger.h); the archive is fine-tuned within
// the budget; champion and challenger rank the judge's facts; only a challenger whose full
// MRR beats the champion's by --margin, and by --z standard errors of the paired difference
// (so that a judge of a few hundred facts does not promote on chance), is promoted: the champion is
// kept beside the archive as ARCHIVE.previous, the challenger replaces ARCHIVE (a rename: a reader
// sees one or the other whole), and every --reload-target reloads it. A reload that fails puts the
// champion back and reloads it where the challenger had been loaded: the cycle then changed
// nothing.
// --rollback serves ARCHIVE.previous again the same way. The report (JSON, --report) says
// what was measured and decided. Exit status: 0 a cycle that ran (promoted or not), 1 a
// failed step (nothing changed), 2 a usage error.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "client/channel.h"
#include "client/triple_export.h"
#include "common/command_line.h"
#include "common/durable_file.h"
#include "common/grpc_status.h"
#include "common/json.h"
#include "graph/triple_file.h"
#include "grpcpp/grpcpp.h"
#include "kg/v1/knowledge_graph.grpc.pb.h"
#include "model/families.h"
#include "train/challenger.h"

ABSL_FLAG(std::string, target, grail::DefaultTarget(),
          "the server the graph is exported from and whose model is tuned (default: the "
          "environment's GRAIL_TARGET, else localhost:50051)");
ABSL_FLAG(std::vector<std::string>, reload_target, {},
          "every replica that serves the model, HOST:PORT, comma-separated or repeated; each "
          "reloads the promoted archive (default: --target alone)");
ABSL_FLAG(std::string, tls_ca, "", "PEM CA bundle: connect over TLS, trusting servers it signed");
ABSL_FLAG(std::string, tls_cert, "", "PEM client certificate, for mutual TLS (with --tls-key)");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls-cert");
ABSL_FLAG(std::string, tls_server_name, "",
          "name the servers' certificates must carry, if not the targets' host");
ABSL_FLAG(std::string, token, "",
          "bearer token, admin scope where the servers check tokens (ReloadModel; the export "
          "needs write) (default: the environment's GRAIL_TOKEN)");
ABSL_FLAG(std::string, work_dir, "", "where the export, the challenger and the report go");
ABSL_FLAG(std::string, model_file, "",
          "the served archive as this process reaches it (default: the path GetStats names, "
          "the same file where both share a volume)");
ABSL_FLAG(absl::Duration, time_budget, absl::Hours(1), "the fine-tuning's time budget");
ABSL_FLAG(uint64_t, judge_facts, 500,
          "the newest facts held out as the judge (at most a tenth of the graph's)");
ABSL_FLAG(uint64_t, valid_facts, 500,
          "the facts before them that select the challenger's epoch (at most a tenth)");
ABSL_FLAG(double, margin, 0.01,
          "full MRR (0..1) by which the challenger must beat the champion to be promoted");
ABSL_FLAG(double, z, 2,
          "standard errors of the paired per-query difference the gain must also exceed (0: the "
          "margin alone)");
ABSL_FLAG(double, lr, 0, "learning rate (0: the recipe's, 5e-4)");
ABSL_FLAG(int, epochs, 0, "epochs at most (0: the recipe's: ULTRA 5, a path model 20)");
ABSL_FLAG(int, threads, 2, "CPU threads for training and judging");
ABSL_FLAG(std::string, device, "cpu", "cpu or cuda[:N]");
ABSL_FLAG(uint64_t, seed, 0, "the fine-tuning's seed");
ABSL_FLAG(std::string, report, "",
          "write the cycle's report (JSON) here too (default: stdout only)");
ABSL_FLAG(bool, dry_run, false, "judge, but promote nothing");
ABSL_FLAG(bool, rollback, false,
          "serve ARCHIVE.previous (the champion the last promotion replaced) again");
ABSL_FLAG(int64_t, deadline_ms, 30000, "deadline of GetStats, and the wait for each export page");
ABSL_FLAG(int64_t, reload_deadline_ms, 600000, "deadline of each ReloadModel (load and warm-up)");

namespace grail {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;

constexpr char kUsage[] =
    R"(grail-tune: fine-tunes the served model on the live graph; promotes it only when better

  grail-tune --target HOST:PORT --work-dir DIR [--reload-target HOST:PORT,...]
             [--time-budget 1h] [--margin 0.01] [--z 2] [--judge-facts 500] [--report FILE]
             [--dry-run]
  grail-tune --rollback --target HOST:PORT [--reload-target HOST:PORT,...]

The served archive (GetStats; --model-file where this process sees it elsewhere) must be a
path-family one (ULTRA's, or a path preset's). The newest --judge-facts facts judge, the
--valid-facts before them pick the epoch, the rest train. The challenger is promoted when its
full MRR on the judge beats the champion's by --margin and by --z standard errors. Prints the
report (JSON) on stdout. Exit status: 0 the cycle ran (promoted or kept), 1 a step failed and
nothing changed, 2 a usage error.
)";

// A replica: its address and a stub on a channel to it.
struct Replica {
  std::string target;
  std::unique_ptr<kg::v1::KnowledgeGraph::Stub> stub;
};

absl::StatusOr<Replica> Connect(const std::string& target) {
  ChannelOptions options;
  options.target = target;
  options.tls_ca = absl::GetFlag(FLAGS_tls_ca);
  options.tls_cert = absl::GetFlag(FLAGS_tls_cert);
  options.tls_key = absl::GetFlag(FLAGS_tls_key);
  options.tls_server_name = absl::GetFlag(FLAGS_tls_server_name);
  options.token = TokenOrEnvironment(absl::GetFlag(FLAGS_token));
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = MakeChannel(options, args);
  if (!channel.ok()) return channel.status();
  return Replica{target, kg::v1::KnowledgeGraph::NewStub(*channel)};
}

void SetDeadline(grpc::ClientContext* context, int64_t ms) {
  if (ms > 0) {
    context->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(ms));
  }
}

absl::StatusOr<kg::v1::GetStatsResponse> Stats(Replica& replica) {
  grpc::ClientContext context;
  SetDeadline(&context, absl::GetFlag(FLAGS_deadline_ms));
  kg::v1::GetStatsResponse stats;
  const grpc::Status status = replica.stub->GetStats(&context, kg::v1::GetStatsRequest(), &stats);
  if (!status.ok()) {
    return absl::Status(ToAbslCode(status.error_code()),
                        absl::StrCat(replica.target, ": GetStats: ", status.error_message()));
  }
  return stats;
}

// ReloadModel(path) on `replica`: the new model's version.
absl::StatusOr<std::string> Reload(Replica& replica, const std::string& path) {
  grpc::ClientContext context;
  SetDeadline(&context, absl::GetFlag(FLAGS_reload_deadline_ms));
  kg::v1::ReloadModelRequest request;
  request.set_path(path);
  kg::v1::ReloadModelResponse response;
  const grpc::Status status = replica.stub->ReloadModel(&context, request, &response);
  if (!status.ok()) {
    return absl::Status(ToAbslCode(status.error_code()),
                        absl::StrCat(replica.target, ": ReloadModel: ", status.error_message()));
  }
  return response.model().version();
}

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (!in.good() && !in.eof()) return absl::InternalError(absl::StrCat("reading ", path));
  return bytes.str();
}

// Keeps `current` (the bytes `model_file` holds) as `kept_as`, makes `model_file` hold
// `replacement`, and has every replica serve it from `served_path`. Any failure puts `current`
// back and reloads it where the replacement had been loaded, so that nothing has changed; the
// first error is returned. `report["reloaded"]` lists each replica's new version.
absl::Status Publish(std::vector<Replica>& replicas, const std::string& model_file,
                     const std::string& served_path, const std::string& current,
                     const std::string& kept_as, const std::string& replacement, Json& report) {
  if (absl::Status kept = WriteAndReplaceFile(kept_as, current); !kept.ok()) return kept;
  if (absl::Status written = WriteAndReplaceFile(model_file, replacement); !written.ok()) {
    return written;
  }
  std::vector<Replica*> loaded;
  report["reloaded"] = Json::array();
  for (Replica& replica : replicas) {
    absl::StatusOr<std::string> version = Reload(replica, served_path);
    if (!version.ok()) {
      absl::Status restored = WriteAndReplaceFile(model_file, current);
      for (Replica* back : loaded) {
        if (restored.ok()) restored = Reload(*back, served_path).status();
      }
      report["restored"] = restored.ok();
      if (!restored.ok()) {
        return absl::Status(version.status().code(),
                            absl::StrCat(version.status().message(), "; restoring ", model_file,
                                         " failed too: ", restored.message()));
      }
      return absl::Status(
          version.status().code(),
          absl::StrCat(version.status().message(), "; ", model_file,
                       " holds the model it held before, reloaded where the new one was"));
    }
    loaded.push_back(&replica);
    report["reloaded"].push_back({{"target", replica.target}, {"version", *version}});
  }
  return absl::OkStatus();
}

void WriteReport(const Json& report) {
  const std::string text = report.dump(2);
  std::printf("%s\n", text.c_str());
  const std::string path = absl::GetFlag(FLAGS_report);
  if (path.empty()) return;
  if (absl::Status written = WriteAndReplaceFile(path, text + "\n"); !written.ok()) {
    std::fprintf(stderr, "grail-tune: writing the report: %s\n",
                 std::string(written.message()).c_str());
  }
}

int Fail(Json& report, const absl::Status& status) {
  report["decision"] = "failed";
  report["error"] = {{"code", absl::StatusCodeToString(status.code())},
                     {"message", std::string(status.message())}};
  WriteReport(report);
  std::fprintf(stderr, "grail-tune: error: %s: %s\n",
               absl::StatusCodeToString(status.code()).c_str(),
               std::string(status.message()).c_str());
  return kExitFailed;
}

int Main(int argc, char** argv) {
  absl::SetProgramUsageMessage(kUsage);
  const std::vector<std::string> positional = ParseCommandLine(argc, argv);
  auto usage_error = [](const std::string& message) {
    std::fprintf(stderr, "grail-tune: %s\n(grail-tune --help shows the usage)\n", message.c_str());
    return kExitUsage;
  };
  if (positional.size() > 1) return usage_error("grail-tune takes no positional arguments");
  const bool rollback = absl::GetFlag(FLAGS_rollback);
  const std::string work_dir = absl::GetFlag(FLAGS_work_dir);
  if (!rollback && work_dir.empty()) return usage_error("--work-dir is required");
  const double margin = absl::GetFlag(FLAGS_margin);
  if (!(margin >= 0 && margin <= 1)) return usage_error("--margin must be in [0, 1]");
  const double z = absl::GetFlag(FLAGS_z);
  if (!(z >= 0)) return usage_error("--z must not be negative");
  if (absl::GetFlag(FLAGS_time_budget) <= absl::ZeroDuration()) {
    return usage_error("--time-budget must be positive");
  }
  if (absl::GetFlag(FLAGS_threads) < 1) return usage_error("--threads must be at least 1");
  if (absl::GetFlag(FLAGS_lr) < 0 || absl::GetFlag(FLAGS_epochs) < 0) {
    return usage_error("--lr and --epochs must not be negative");
  }

  Json report = {{"mode", rollback ? "rollback" : "tune"}};
  std::vector<std::string> reload_targets = absl::GetFlag(FLAGS_reload_target);
  if (reload_targets.empty()) reload_targets = {absl::GetFlag(FLAGS_target)};
  absl::StatusOr<Replica> source = Connect(absl::GetFlag(FLAGS_target));
  if (!source.ok()) return usage_error(std::string(source.status().message()));
  std::vector<Replica> replicas;
  for (const std::string& target : reload_targets) {
    absl::StatusOr<Replica> replica = Connect(target);
    if (!replica.ok()) return usage_error(std::string(replica.status().message()));
    replicas.push_back(*std::move(replica));
  }

  // The served archive, by the server's path and by ours.
  absl::StatusOr<kg::v1::GetStatsResponse> stats = Stats(*source);
  if (!stats.ok()) return Fail(report, stats.status());
  const std::string served_path = stats->model().path();
  const std::string model_file =
      absl::GetFlag(FLAGS_model_file).empty() ? served_path : absl::GetFlag(FLAGS_model_file);
  report["model_file"] = model_file;
  report["served_path"] = served_path;
  report["champion_version"] = stats->model().version();
  absl::StatusOr<std::string> champion_bytes = ReadWholeFile(model_file);
  if (!champion_bytes.ok()) {
    return Fail(report,
                absl::FailedPreconditionError(absl::StrCat(
                    "the served archive is not readable here (", champion_bytes.status().message(),
                    "): run grail-tune where it shares the server's model volume, or pass "
                    "--model-file")));
  }
  const std::string previous = model_file + ".previous";

  if (rollback) {
    absl::StatusOr<std::string> previous_bytes = ReadWholeFile(previous);
    if (!previous_bytes.ok()) {
      return Fail(report, absl::FailedPreconditionError(absl::StrCat(
                              "nothing to roll back to: ", previous_bytes.status().message())));
    }
    absl::Status published = Publish(replicas, model_file, served_path, *champion_bytes,
                                     model_file + ".rolled-back", *previous_bytes, report);
    if (!published.ok()) return Fail(report, published);
    report["decision"] = "rolled_back";
    WriteReport(report);
    return kExitOk;
  }

  // The graph, in order of addition.
  std::error_code error;
  std::filesystem::create_directories(work_dir, error);
  if (error) {
    return Fail(report, absl::FailedPreconditionError(
                            absl::StrCat("cannot create ", work_dir, ": ", error.message())));
  }
  const std::string export_file = (std::filesystem::path(work_dir) / "export.tsv").string();
  ExportOptions export_options;
  export_options.page_timeout_ms = absl::GetFlag(FLAGS_deadline_ms);
  absl::StatusOr<ExportSummary> exported =
      ExportTriplesToFile(*source->stub, export_options, export_file);
  if (!exported.ok()) return Fail(report, exported.status());
  report["export"] = {{"graph_sequence", exported->graph_sequence},
                      {"facts", exported->facts},
                      {"seconds", exported->seconds}};
  absl::StatusOr<std::vector<NamedTriple>> facts = ReadTripleFile(export_file);
  if (!facts.ok()) return Fail(report, facts.status());

  // The challenger, judged with the champion.
  absl::StatusOr<AnyModel> champion = LoadAnyModel(model_file, absl::GetFlag(FLAGS_device));
  if (!champion.ok()) return Fail(report, champion.status());
  if (champion->path == nullptr) {
    return Fail(report, absl::FailedPreconditionError(absl::StrCat(
                            "the served model (", model_file,
                            ") is not a path-family archive: grail-tune fine-tunes ULTRA's and "
                            "the path presets' archives")));
  }
  PathTrainOptions base;
  base.init = model_file;
  base.seed = absl::GetFlag(FLAGS_seed);
  base.threads = absl::GetFlag(FLAGS_threads);
  base.device = absl::GetFlag(FLAGS_device);
  base.time_budget_seconds = absl::ToDoubleSeconds(absl::GetFlag(FLAGS_time_budget));
  ChallengeOptions options;
  options.recipe = FineTuneRecipe(*champion->path, base);
  if (absl::GetFlag(FLAGS_lr) > 0) options.recipe.learning_rate = absl::GetFlag(FLAGS_lr);
  if (absl::GetFlag(FLAGS_epochs) > 0) options.recipe.epochs = absl::GetFlag(FLAGS_epochs);
  options.judge_facts = absl::GetFlag(FLAGS_judge_facts);
  options.valid_facts = absl::GetFlag(FLAGS_valid_facts);
  options.eval_threads = absl::GetFlag(FLAGS_threads);
  report["recipe"] = {{"family", champion->path->open_vocabulary() ? "ultra" : "path"},
                      {"learning_rate", options.recipe.learning_rate},
                      {"epochs", options.recipe.epochs},
                      {"time_budget_seconds", options.recipe.time_budget_seconds}};
  absl::StatusOr<Challenge> challenge =
      RunChallenge(*facts, *champion->path, options, [](const EpochReport& epoch) {
        std::fprintf(stderr, "grail-tune: epoch %d loss %.4f%s%s\n", epoch.epoch, epoch.loss,
                     epoch.valid_mrr ? absl::StrCat(" valid MRR ", *epoch.valid_mrr).c_str() : "",
                     epoch.cut ? " (cut by the time budget)" : "");
      });
  if (!challenge.ok()) return Fail(report, challenge.status());
  report["judge"] = challenge->ToJson();
  report["margin"] = margin;
  report["z"] = z;
  const bool better = challenge->Beats(margin, z);
  const std::string challenger_file = (std::filesystem::path(work_dir) / "challenger.pt").string();
  if (absl::Status saved = challenge->model->Save(challenger_file); !saved.ok()) {
    return Fail(report, saved);
  }
  report["challenger_file"] = challenger_file;
  if (!better || absl::GetFlag(FLAGS_dry_run)) {
    report["decision"] = better ? "would_promote" : "kept";
    WriteReport(report);
    return kExitOk;
  }

  absl::StatusOr<std::string> challenger_bytes = ReadWholeFile(challenger_file);
  if (!challenger_bytes.ok()) return Fail(report, challenger_bytes.status());
  absl::Status published = Publish(replicas, model_file, served_path, *champion_bytes, previous,
                                   *challenger_bytes, report);
  if (!published.ok()) return Fail(report, published);
  report["decision"] = "promoted";
  WriteReport(report);
  return kExitOk;
}

}  // namespace
}  // namespace grail

int main(int argc, char** argv) { return grail::Main(argc, argv); }
