#include "train/training_checkpoint.h"

#include <ATen/CPUGeneratorImpl.h>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/durable_file.h"
#include "common/json.h"

namespace grail {
namespace {

const char* const kTensorFiles[] = {"parameters", "optimizer", "best", "torch-rng"};

Json GeneratorState(const SeededRandom& random) {
  Json words = Json::array();
  for (uint64_t w : random.state()) words.push_back(w);
  return words;
}

void RestoreGenerator(const Json& words, SeededRandom& random) {
  std::array<uint64_t, 4> state;
  for (int i = 0; i < 4; ++i) state[i] = words.at(i).get<uint64_t>();
  random.set_state(state);
}

}  // namespace

std::string TrainingCheckpoint::File(const std::string& name, const TrainingPosition& at) const {
  if (at.within.next > 0) {
    return absl::StrCat(dir_, "/", name, "-", at.epoch, "-step", at.within.steps, ".pt");
  }
  return absl::StrCat(dir_, "/", name, "-", at.epoch, ".pt");
}

absl::Status TrainingCheckpoint::Write(const TrainingPosition& at, const std::string& run_key,
                                       const std::vector<torch::Tensor>& parameters,
                                       torch::optim::Optimizer& optimizer, const BestModel& best,
                                       const SeededRandom& order_random,
                                       const SeededRandom& negative_random) const {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", dir_, ": ", ec.message()));
  try {
    torch::save(parameters, File("parameters", at));
    torch::save(optimizer, File("optimizer", at));
    torch::save(best.tensors(), File("best", at));
    at::Generator generator = at::detail::getDefaultCPUGenerator();
    torch::Tensor rng;
    {
      std::lock_guard<std::mutex> lock(generator.mutex());
      rng = generator.get_state();
    }
    torch::save(rng, File("torch-rng", at));
  } catch (const c10::Error& e) {
    return absl::InternalError(
        absl::StrCat("cannot write a checkpoint to ", dir_, ": ", e.what_without_backtrace()));
  }
  // On the disk, with their names, before state.json names them: a machine crash after the
  // commit must not find them short.
  for (const char* name : kTensorFiles) {
    if (absl::Status synced = SyncPath(File(name, at)); !synced.ok()) return synced;
  }
  if (absl::Status synced = SyncPath(dir_); !synced.ok()) return synced;
  Json state = {{"run", run_key},
                {"epoch", at.epoch},
                {"steps", at.steps},
                {"best_metric", best.metric()},
                {"order_random", GeneratorState(order_random)},
                {"negative_random", GeneratorState(negative_random)}};
  if (at.within.next > 0) {
    state["within"] = {{"next", at.within.next},
                       {"steps", at.within.steps},
                       {"seen", at.within.seen},
                       {"loss", at.within.loss},
                       {"seconds", at.within.seconds}};
  }
  // The commit: written aside, synced, renamed, the rename synced. Only then are the old
  // files removed.
  if (absl::Status replaced =
          WriteAndReplaceFile(StatePath() + ".tmp", StatePath(), JsonLine(state) + "\n");
      !replaced.ok()) {
    return absl::InternalError(
        absl::StrCat("cannot write ", StatePath(), ": ", replaced.message()));
  }
  // Every other checkpoint's files (the previous one's, and any a crash left before its
  // commit) are no longer named by state.json.
  std::vector<std::filesystem::path> stale;
  for (const auto& entry : std::filesystem::directory_iterator(dir_, ec)) {
    const std::string file = entry.path().filename().string();
    if (entry.path().extension() != ".pt") continue;
    for (const char* name : kTensorFiles) {
      // By file name: the directory may be spelt with a trailing slash or "./".
      if (absl::StartsWith(file, absl::StrCat(name, "-")) &&
          file != std::filesystem::path(File(name, at)).filename().string()) {
        stale.push_back(entry.path());
      }
    }
  }
  for (const std::filesystem::path& file : stale) std::filesystem::remove(file, ec);
  return absl::OkStatus();
}

absl::StatusOr<TrainingPosition> TrainingCheckpoint::Restore(const std::string& run_key,
                                                             std::vector<torch::Tensor>& parameters,
                                                             torch::optim::Optimizer& optimizer,
                                                             BestModel& best,
                                                             SeededRandom& order_random,
                                                             SeededRandom& negative_random) const {
  std::ifstream in(StatePath());
  if (!in) return TrainingPosition{};
  std::stringstream text;
  text << in.rdbuf();
  Json state = Json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (state.is_discarded() || !state.is_object() || !state.contains("epoch")) {
    return absl::InvalidArgumentError(absl::StrCat(StatePath(), " is damaged"));
  }
  if (state.value("run", "") != run_key) {
    return absl::InvalidArgumentError(
        absl::StrCat(StatePath(), " is the checkpoint of another run (other data or options): ",
                     state.value("run", ""), " vs ", run_key));
  }
  TrainingPosition at;
  at.epoch = state.at("epoch").get<int>();
  // Checkpoints written before steps were kept have none: only a step schedule needs them.
  at.steps = state.value("steps", int64_t{0});
  if (const auto within = state.find("within"); within != state.end()) {
    try {
      at.within.next = within->at("next").get<int64_t>();
      at.within.steps = within->at("steps").get<int64_t>();
      at.within.seen = within->at("seen").get<int64_t>();
      at.within.loss = within->at("loss").get<double>();
      at.within.seconds = within->at("seconds").get<double>();
    } catch (const Json::exception&) {
      at.within.next = 0;
    }
    if (at.within.next <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(StatePath(), " is damaged"));
    }
  }
  // A checkpoint resumes on whichever device the model is on now: its tensors are read onto
  // that device, not the one that wrote them (a run begun on the CPU goes on on a GPU, and back).
  const torch::Device device = parameters.empty() ? torch::kCPU : parameters.front().device();
  try {
    std::vector<torch::Tensor> saved, saved_best;
    torch::Tensor rng;
    torch::load(saved, File("parameters", at), device);
    torch::load(saved_best, File("best", at), device);
    torch::load(optimizer, File("optimizer", at), device);
    // Checkpoints written before the generator was kept have no file of it: they resume with
    // the generator as the model's seed left it.
    const bool has_rng = std::filesystem::exists(File("torch-rng", at));
    if (has_rng) torch::load(rng, File("torch-rng", at), torch::Device(torch::kCPU));
    if (saved.size() != parameters.size() || saved_best.size() != parameters.size()) {
      return absl::InvalidArgumentError("the checkpoint's parameters do not fit the model");
    }
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < parameters.size(); ++i) {
      if (!saved[i].sizes().equals(parameters[i].sizes())) {
        return absl::InvalidArgumentError("the checkpoint's parameters do not fit the model");
      }
      parameters[i].copy_(saved[i]);
    }
    best.tensors() = std::move(saved_best);
    if (has_rng) {
      at::Generator generator = at::detail::getDefaultCPUGenerator();
      std::lock_guard<std::mutex> lock(generator.mutex());
      generator.set_state(rng);
    }
  } catch (const c10::Error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read the checkpoint in ", dir_, ": ", e.what_without_backtrace()));
  }
  RestoreGenerator(state.at("order_random"), order_random);
  RestoreGenerator(state.at("negative_random"), negative_random);
  best.set_metric(state.at("best_metric").get<double>());
  return at;
}

std::string TrainingDataFingerprint(const IndexedTriples& train, size_t valid_facts) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (const Triple& t : train.triples) {
    for (uint32_t v : {t.head, t.relation, t.tail}) hash = (hash ^ v) * 0x100000001b3ULL;
  }
  return absl::StrCat(hash, ":", train.triples.size(), ":", valid_facts);
}

BestModel::BestModel(const std::vector<torch::Tensor>& parameters) {
  for (const torch::Tensor& p : parameters) tensors_.push_back(p.detach().clone());
}

bool BestModel::Offer(double metric, bool scheduled, const std::vector<torch::Tensor>& parameters) {
  if (metric < metric_) return false;
  if (scheduled) {
    metric_ = metric;
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < parameters.size(); ++i) tensors_[i] = parameters[i].detach().clone();
  } else {
    last_is_best_ = true;  // the parameters stay as they are at the end
  }
  return true;
}

void BestModel::Apply(std::vector<torch::Tensor>& parameters) const {
  if (last_is_best_ || metric_ < 0) return;
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < parameters.size(); ++i) parameters[i].copy_(tensors_[i]);
}

std::vector<Triple> ValidationFacts(const IndexedTriples& train, const StaticGraph& graph,
                                    absl::Span<const NamedTriple> valid) {
  std::vector<Triple> facts;
  for (const NamedTriple& v : valid) {
    auto h = train.entities.Find(v.head);
    auto r = train.relations.Find(v.relation);
    auto t = train.entities.Find(v.tail);
    if (h && r && t && *h != *t && !graph.HasFact(*h, *r, *t)) facts.push_back({*h, *r, *t});
  }
  return facts;
}

}  // namespace grail
