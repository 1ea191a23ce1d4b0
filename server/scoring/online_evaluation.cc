#include "server/scoring/online_evaluation.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "server/engine/inference_engine.h"

namespace grail {

void RankWindow::Add(double rank) {
  ranks_.push_back(rank);
  reciprocal_sum_ += 1 / rank;
  hits_ += rank <= 10;
  if (ranks_.size() > size_) {
    const double oldest = ranks_.front();
    ranks_.pop_front();
    reciprocal_sum_ -= 1 / oldest;
    hits_ -= oldest <= 10;
  }
  if (ranks_.empty()) reciprocal_sum_ = 0;  // no drift once emptied
}

class OnlineEvaluator::Chunk {
 public:
  explicit Chunk(OnlineEvaluator& evaluator)
      : evaluator_(evaluator), start_(std::chrono::steady_clock::now()) {}

  // One ranking ended with `ranking` (its answer's rank, or an error).
  void Ranked(const absl::StatusOr<Ranking>& ranking) {
    bool last;
    {
      absl::MutexLock lock(&mu_);
      if (!ranking.ok()) {
        const absl::StatusCode code = ranking.status().code();
        ++(code == absl::StatusCode::kInvalidArgument || code == absl::StatusCode::kNotFound
               ? unscorable_
               : errors_);
      } else if (ranking->answer_rank > 0) {
        ranks_.emplace_back(ranking->model_version, ranking->answer_rank);
      } else {
        ++known_;  // filtered: the graph holds the fact already
      }
      last = --pending_ == 0;
    }
    if (last) evaluator_.Finished(*this);
    evaluator_.RankingEnded();  // the last use of the evaluator: it may be destroyed after
  }

  void Decide(bool stored) {
    bool last;
    {
      absl::MutexLock lock(&mu_);
      stored_ = stored;
      last = --pending_ == 0;
    }
    if (last) evaluator_.Finished(*this);
  }

  OnlineEvaluator& evaluator_;
  const std::chrono::steady_clock::time_point start_;
  absl::Mutex mu_;
  int pending_ ABSL_GUARDED_BY(mu_) = 1;  // the rankings, and the chunk's outcome
  bool stored_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::pair<std::string, double>> ranks_ ABSL_GUARDED_BY(mu_);
  size_t errors_ ABSL_GUARDED_BY(mu_) = 0;
  size_t unscorable_ ABSL_GUARDED_BY(mu_) = 0;
  size_t known_ ABSL_GUARDED_BY(mu_) = 0;
  int rankings_ = 0;  // started, set before any can end
};

OnlineEvaluator::OnlineEvaluator(const LinkPredictor& predictor, OnlineEvalOptions options,
                                 OnlineEvalObserver* observer)
    : predictor_(predictor), options_(options), observer_(observer), random_(options.seed) {}

OnlineEvaluator::~OnlineEvaluator() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](int64_t* in_flight) { return *in_flight == 0; }, &in_flight_));
}

void OnlineEvaluator::RankingEnded() {
  absl::MutexLock lock(&mu_);
  --in_flight_;
}

int64_t OnlineEvaluator::in_flight() const {
  absl::MutexLock lock(&mu_);
  return in_flight_;
}

std::shared_ptr<OnlineEvaluator::Chunk> OnlineEvaluator::BeforeApply(
    absl::Span<const NamedTriple> facts) {
  if (options_.rate <= 0 || facts.empty()) return nullptr;
  std::vector<const NamedTriple*> sampled;
  {
    absl::MutexLock lock(&mu_);
    for (const NamedTriple& f : facts) {
      if (options_.rate >= 1 || random_.Uniform(1u << 30) < options_.rate * (1u << 30)) {
        sampled.push_back(&f);
      }
    }
    if (sampled.empty()) return nullptr;
    if (sampled.size() > options_.max_facts_per_chunk) {  // a uniform subset of them
      for (size_t i = 0; i < options_.max_facts_per_chunk; ++i) {
        std::swap(sampled[i], sampled[i + random_.Uniform(sampled.size() - i)]);
      }
      sampled.resize(options_.max_facts_per_chunk);
    }
    if (in_flight_ > 0 || std::chrono::steady_clock::now() < next_start_) {
      observer_->OnOnlineSkipped("busy", 2 * sampled.size());
      return nullptr;
    }
  }
  const std::shared_ptr<const GraphSnapshot> graph = predictor_.store().Snapshot();
  std::vector<RankQuery> queries;
  for (const NamedTriple* f : sampled) {
    if (!graph->FindEntity(f->head) || !graph->FindEntity(f->tail)) {
      observer_->OnOnlineSkipped("new_entity", 2);
      continue;
    }
    if (f->head == f->tail) {
      observer_->OnOnlineSkipped("unscorable", 2);
      continue;
    }
    for (const bool tails : {true, false}) {
      RankQuery q;
      q.rank_tails = tails;
      q.fixed = tails ? f->head : f->tail;
      q.answer = tails ? f->tail : f->head;
      q.relation = f->relation;
      q.top_k = 1;
      q.filter_known_facts = true;
      queries.push_back(std::move(q));
    }
  }
  if (queries.empty()) return nullptr;
  auto chunk = std::make_shared<Chunk>(*this);
  chunk->rankings_ = static_cast<int>(queries.size());
  {
    absl::MutexLock lock(&chunk->mu_);
    chunk->pending_ += chunk->rankings_;
  }
  {
    absl::MutexLock lock(&mu_);
    in_flight_ += chunk->rankings_;
  }
  for (RankQuery& q : queries) {
    auto control = std::make_shared<CallControl>();
    control->set_caller("online-eval");
    // The snapshot is taken here, before the chunk is applied; the ranking runs later.
    predictor_.Rank(std::move(q), std::move(control),
                    [chunk](absl::StatusOr<Ranking> ranking) { chunk->Ranked(ranking); });
  }
  return chunk;
}

void OnlineEvaluator::AfterApply(const std::shared_ptr<Chunk>& chunk, bool stored) {
  if (chunk != nullptr) chunk->Decide(stored);
}

void OnlineEvaluator::Finished(Chunk& chunk) {
  // Every ranking and the outcome are in: nothing else touches the chunk's fields.
  std::vector<std::pair<std::string, double>> ranks;
  size_t errors, unscorable, known;
  bool stored;
  {
    absl::MutexLock lock(&chunk.mu_);
    ranks = std::move(chunk.ranks_);
    errors = chunk.errors_;
    unscorable = chunk.unscorable_;
    known = chunk.known_;
    stored = chunk.stored_;
  }
  const auto now = std::chrono::steady_clock::now();
  {
    absl::MutexLock lock(&mu_);
    // The duty cycle: busy for d, then idle for d * (1 / share - 1).
    const auto busy = now - chunk.start_;
    const double share = std::clamp(options_.cpu_share, 1e-3, 1.0);
    next_start_ = now + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            busy * (1 / share - 1));
    if (stored) {
      for (const auto& [version, rank] : ranks) {
        auto it = windows_.find(version);
        if (it == windows_.end()) {
          constexpr size_t kVersionsKept = 4;
          if (versions_.size() == kVersionsKept) {
            windows_.erase(versions_.front());
            versions_.pop_front();
          }
          versions_.push_back(version);
          it = windows_.emplace(version, RankWindow(options_.window)).first;
        }
        it->second.Add(rank);
        observer_->OnOnlineRank(version, rank, it->second.mrr(), it->second.hits_at_10(),
                                it->second.count());
      }
    }
  }
  if (!stored && !ranks.empty()) observer_->OnOnlineSkipped("dropped", ranks.size());
  if (unscorable > 0) observer_->OnOnlineSkipped("unscorable", unscorable);
  if (errors > 0) observer_->OnOnlineSkipped("error", errors);
  if (known > 0) observer_->OnOnlineSkipped("known", known);
}

}  // namespace grail
