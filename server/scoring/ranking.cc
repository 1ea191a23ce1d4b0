#include "server/scoring/ranking.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace grail {
namespace {

// How many candidates a ranking keeps: top_k, but never more than there are candidates (a
// top_k of 10^8 over a few entities holds, and reserves at admission, a few entries).
uint32_t KeptAtMost(const RankingSetup& s) {
  if (s.top_k == 0) return 0;  // all of them
  const uint64_t candidates =
      s.candidates.empty() ? s.graph->num_live_entities() : s.candidates.size();
  return static_cast<uint32_t>(std::max<uint64_t>(1, std::min<uint64_t>(s.top_k, candidates)));
}

}  // namespace

bool Better(const Candidate& a, const Candidate& b) {
  const bool a_nan = std::isnan(a.score), b_nan = std::isnan(b.score);
  if (a_nan != b_nan) return b_nan;
  if (!a_nan && a.score != b.score) return a.score > b.score;
  return a.id < b.id;
}

void TopCandidates::Add(const Candidate& c) {
  if (k_ == 0) {
    all_.push_back(c);
    return;
  }
  if (heap_.size() < k_) {
    heap_.push(c);
  } else if (Better(c, heap_.top())) {
    heap_.pop();
    heap_.push(c);
  }
}

std::vector<Candidate> TopCandidates::TakeAll() {
  std::vector<Candidate> out = std::move(all_);
  while (!heap_.empty()) {
    out.push_back(heap_.top());
    heap_.pop();
  }
  return out;
}

std::vector<Candidate> TopCandidates::TakeSorted() {
  std::vector<Candidate> out = TakeAll();
  std::sort(out.begin(), out.end(), Better);
  return out;
}

// Walks the far candidates that share one score, in id order: every entity not in not_far_,
// not removed, not the fixed one and not scored apart (far_apart_). O(top_k + not_far_ +
// removed + far_apart_) for the first top_k.
class RankingState::FarCursor {
 public:
  explicit FarCursor(const RankingState& state)
      : state_(state), removed_(state.s_.graph->RemovedEntities()) {}
  EntityId Next() {
    for (;; ++id_) {
      if (id_ == state_.s_.fixed || Skip(state_.not_far_, id_, skip_) ||
          Skip(removed_, id_, skip_removed_) || Skip(state_.far_apart_, id_, skip_apart_)) {
        continue;
      }
      return id_++;
    }
  }

 private:
  // Whether the sorted `ids` hold `id`, advancing `*at` past the ids below it (ids are asked
  // in increasing order).
  static bool Skip(absl::Span<const EntityId> ids, EntityId id, size_t& at) {
    while (at < ids.size() && ids[at] < id) ++at;
    return at < ids.size() && ids[at] == id;
  }

  const RankingState& state_;
  const absl::Span<const EntityId> removed_;
  EntityId id_ = 0;
  size_t skip_ = 0;
  size_t skip_removed_ = 0;
  size_t skip_apart_ = 0;
};

RankingState::RankingState(RankingSetup setup) : s_(std::move(setup)), top_(KeptAtMost(s_)) {
  explicit_candidates_ = !s_.candidates.empty();
}

bool RankingState::Known(EntityId candidate) const {
  return s_.graph_relation != kNoGraphRelation &&
         s_.graph->HasFact(Head(candidate), s_.graph_relation, Tail(candidate));
}

std::string RankingState::DescribeQuery() const {
  const std::string fixed = absl::StrCat("\"", s_.graph->EntityName(s_.fixed), "\"");
  return s_.rank_tails ? absl::StrCat("(", fixed, ", \"", s_.relation_name, "\", ?)")
                       : absl::StrCat("(?, \"", s_.relation_name, "\", ", fixed, ")");
}

std::string RankingState::DescribeFact(EntityId candidate) const {
  const std::string fixed = absl::StrCat("\"", s_.graph->EntityName(s_.fixed), "\"");
  const std::string other = absl::StrCat("\"", s_.graph->EntityName(candidate), "\"");
  return absl::StrCat("(", s_.rank_tails ? fixed : other, ", \"", s_.relation_name, "\", ",
                      s_.rank_tails ? other : fixed, ")");
}

absl::Status RankingState::Refuse(absl::string_view limit, std::string message) const {
  if (s_.observer != nullptr) s_.observer->OnCallRejected(limit);
  return absl::ResourceExhaustedError(std::move(message));
}

absl::Status RankingState::ResolveExplicitCandidates() {
  absl::flat_hash_set<EntityId> seen;
  for (const std::string& name : s_.candidates) {
    absl::StatusOr<EntityId> id = FindEntity(*s_.graph, name);
    if (!id.ok()) return id.status();
    if (*id != s_.fixed && seen.insert(*id).second) near_.push_back(*id);
  }
  s_.candidates = std::vector<std::string>();  // not needed any more
  if (near_.size() > s_.limits.max_rank_subgraphs) {
    return Refuse("max_rank_subgraphs",
                  absl::StrCat("ranking ", near_.size(), " candidates; the limit is ",
                               s_.limits.max_rank_subgraphs,
                               " (--max-rank-subgraphs); split the list over several calls"));
  }
  return absl::OkStatus();
}

void RankingState::FilterKnownFacts() {
  if (!s_.filter_known_facts || s_.graph_relation == kNoGraphRelation) return;
  size_t write = 0;
  for (EntityId c : near_) {
    if (s_.graph->HasFact(Head(c), s_.graph_relation, Tail(c))) {
      ++filtered_;
    } else {
      near_[write++] = c;
    }
  }
  near_.resize(write);
}

absl::Status RankingState::CheckResultCount(uint64_t candidates) const {
  if (s_.top_k != 0 || candidates <= s_.limits.max_rank_results) return absl::OkStatus();
  return Refuse(
      "max_rank_results",
      absl::StrCat("ranking every entity would return ", candidates, " candidates; the limit is ",
                   s_.limits.max_rank_results, " (--max-rank-results); set options.top_k"));
}

EntityId RankingState::FirstFar() const { return FarCursor(*this).Next(); }

CandidateScores RankingState::MemberScores() {
  std::vector<Candidate> all = top_.TakeAll();
  std::sort(all.begin(), all.end(),
            [](const Candidate& a, const Candidate& b) { return a.id < b.id; });
  CandidateScores out;
  out.near.reserve(all.size());
  out.score.reserve(all.size());
  out.pruned.reserve(all.size());
  for (const Candidate& c : all) {
    out.near.push_back(c.id);
    out.score.push_back(c.score);
    out.pruned.push_back(c.pruned ? 1 : 0);
  }
  out.not_far = std::move(not_far_);
  out.far = shared_score_;
  out.pruned_pass = pruned_;
  return out;
}

Ranking RankingState::Result(float far_score, ScoredBy far_scored_by) {
  const GraphSnapshot& graph = *s_.graph;
  Ranking ranking;
  ranking.graph_sequence = graph.sequence();
  ranking.model_version = s_.model->version();
  ranking.candidates_scored = static_cast<uint32_t>(near_.size() + far_count_);
  ranking.candidates_filtered = filtered_;
  const uint64_t far_shared = far_count_ - far_apart_.size();
  ranking.candidates_shared_score = static_cast<uint32_t>(far_shared);
  ranking.candidates_pruned = (pruned_ ? static_cast<uint32_t>(far_count_) : 0) + pruned_apart_;
  if (s_.answer) ranking.answer_rank = AnswerRank(far_score);
  const std::vector<Candidate> best = top_.TakeSorted();
  const size_t total = best.size() + far_shared;
  const size_t keep = s_.top_k == 0 ? total : std::min<size_t>(s_.top_k, total);
  ranking.ranked.reserve(keep);
  // Merge the near candidates (sorted) with the far ones (one score, id order).
  FarCursor far(*this);
  uint64_t far_left = far_shared;
  Candidate next_far{far_score, 0, false, far_scored_by, pruned_};
  bool has_far = false;  // next_far holds the next far candidate not yet ranked
  size_t b = 0;
  while (ranking.ranked.size() < keep) {
    if (!has_far && far_left > 0) {
      next_far.id = far.Next();
      has_far = true;
      --far_left;
    }
    Candidate c;
    if (b < best.size() && (!has_far || Better(best[b], next_far))) {
      c = best[b++];
    } else {
      c = next_far;
      has_far = false;
    }
    uint32_t rank = static_cast<uint32_t>(ranking.ranked.size() + 1);
    if (!ranking.ranked.empty() && ranking.ranked.back().score == c.score) {
      rank = ranking.ranked.back().rank;
    }
    ranking.ranked.push_back(
        RankedEntity{graph.EntityName(c.id), c.score, rank, c.known_fact, c.scored_by, c.pruned});
  }
  return ranking;
}

double RankingState::AnswerRank(float far_score) const {
  const EntityId answer = *s_.answer;
  std::optional<float> score = answer_score_;
  const uint64_t far_shared = far_count_ - far_apart_.size();
  bool answer_far = false;
  if (!score && !explicit_candidates_ && answer != s_.fixed && far_shared > 0 &&
      !std::binary_search(not_far_.begin(), not_far_.end(), answer) &&
      !std::binary_search(far_apart_.begin(), far_apart_.end(), answer)) {
    const absl::Span<const EntityId> removed = s_.graph->RemovedEntities();
    if (!std::binary_search(removed.begin(), removed.end(), answer)) {
      score = far_score;
      answer_far = true;
    }
  }
  if (!score) return 0;
  // As Better() orders them: a NaN below every number, NaNs level with each other.
  auto above = [](float a, float b) {
    return std::isnan(b) ? !std::isnan(a) : !std::isnan(a) && a > b;
  };
  auto level = [](float a, float b) { return a == b || (std::isnan(a) && std::isnan(b)); };
  double higher = 0, ties = 0;
  for (float other : added_scores_) {
    if (above(other, *score)) {
      ++higher;
    } else if (level(other, *score)) {
      ++ties;
    }
  }
  const double others_far = static_cast<double>(far_shared - (answer_far ? 1 : 0));
  if (above(far_score, *score)) {
    higher += others_far;
  } else if (level(far_score, *score)) {
    ties += others_far;
  }
  return 1 + higher + ties / 2;
}

size_t RankingState::MemoryBytes() const {
  size_t bytes = sizeof(*this) + near_.capacity() * sizeof(EntityId) +
                 added_scores_.capacity() * sizeof(float) + not_far_.capacity() * sizeof(EntityId) +
                 top_.MemoryBytes() + far_apart_.capacity() * sizeof(EntityId);
  for (const std::string& c : s_.candidates) bytes += sizeof(std::string) + c.capacity();
  return bytes;
}

}  // namespace grail
