// What a ranking does whatever the family scores it: the candidates (an explicit list, or
// every live entity), which are near (scored on their own) and which are far (sharing one
// score), known facts filtered, the best top_k kept, and the answer merged from both.
#ifndef GRAIL_SERVER_SCORING_RANKING_H_
#define GRAIL_SERVER_SCORING_RANKING_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <queue>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "server/scoring/scoring_jobs.h"

namespace grail {

// A ranked candidate; best first is: higher score, then lower id. NaN ranks last.
struct Candidate {
  float score = 0;
  EntityId id = 0;
  bool known_fact = false;
  ScoredBy scored_by = ScoredBy::kGrail;
  // A pruned pass did not visit it: `score` is the far score (RankedEntity::pruned).
  bool pruned = false;
};
bool Better(const Candidate& a, const Candidate& b);

// The best `k` candidates seen (all of them for k = 0), in O(k) memory.
class TopCandidates {
 public:
  explicit TopCandidates(uint32_t k) : k_(k) {}
  void Add(const Candidate& c);
  // Best first.
  std::vector<Candidate> TakeSorted();
  // In no order.
  std::vector<Candidate> TakeAll();
  size_t MemoryBytes() const { return (std::max<size_t>(k_, all_.capacity())) * sizeof(Candidate); }

 private:
  struct Worse {  // the heap's top is the worst candidate kept
    bool operator()(const Candidate& a, const Candidate& b) const { return Better(a, b); }
  };
  const uint32_t k_;
  std::priority_queue<Candidate, std::vector<Candidate>, Worse> heap_;
  std::vector<Candidate> all_;
};

// One ranking's candidates and outcome; a family's ranking job holds one and fills it.
class RankingState {
 public:
  explicit RankingState(RankingSetup setup);

  const RankingSetup& setup() const { return s_; }
  const GraphSnapshot& graph() const { return *s_.graph; }
  EntityId Head(EntityId candidate) const { return s_.rank_tails ? s_.fixed : candidate; }
  EntityId Tail(EntityId candidate) const { return s_.rank_tails ? candidate : s_.fixed; }
  // Whether the graph holds the fact that `candidate` completes.
  bool Known(EntityId candidate) const;

  // The query itself, for errors that are not about one candidate: ("a", "r", ?).
  std::string DescribeQuery() const;
  // The fact `candidate` completes: ("a", "r", "b").
  std::string DescribeFact(EntityId candidate) const;
  // RESOURCE_EXHAUSTED with `message`, reported as a refusal by `limit`.
  absl::Status Refuse(absl::string_view limit, std::string message) const;

  // An explicit candidate list: resolved to ids (NOT_FOUND for an unknown one), deduplicated,
  // the fixed entity left out, into near; refused past max_rank_subgraphs.
  absl::Status ResolveExplicitCandidates();
  bool explicit_candidates() const { return explicit_candidates_; }
  // Leaves the near candidates that complete a stored fact out (with filter_known_facts).
  void FilterKnownFacts();
  // Refuses a ranking of every candidate (top_k 0) past max_rank_results; `candidates` is
  // how many it would return.
  absl::Status CheckResultCount(uint64_t candidates) const;

  // Candidates scored on their own.
  std::vector<EntityId>& near() { return near_; }
  const std::vector<EntityId>& near() const { return near_; }
  // Sorted: the candidates that do not share the far score.
  std::vector<EntityId>& not_far() { return not_far_; }
  const std::vector<EntityId>& not_far() const { return not_far_; }
  // Sorted: far candidates scored apart all the same (a fusion archive's with embeddings).
  std::vector<EntityId>& far_apart() { return far_apart_; }
  // Far candidates, far_apart() included.
  uint64_t far_count() const { return far_count_; }
  void set_far_count(uint64_t count) { far_count_ = count; }
  void count_filtered() { ++filtered_; }
  void set_shared_score(float score) { shared_score_ = score; }
  // The pass was pruned: every far candidate is one it left unvisited
  // (Ranking::candidates_pruned).
  void set_pruned() { pruned_ = true; }
  // A candidate scored apart that the pruned pass did not visit (an explicit one, or a known
  // answer): Add it with Candidate::pruned.
  void count_pruned() { ++pruned_apart_; }
  float shared_score() const { return shared_score_; }
  void Add(const Candidate& c) {
    top_.Add(c);
    if (s_.answer) {
      if (c.id == *s_.answer) {
        answer_score_ = c.score;
      } else {
        added_scores_.push_back(c.score);
      }
    }
  }

  // The first far candidate that shares the far score (in id order).
  EntityId FirstFar() const;

  // The answer: the kept candidates merged with the far ones, which share `far_score`.
  Ranking Result(float far_score, ScoredBy far_scored_by);
  // The answer as an ensemble's member gives it (RankingSetup::member_scores): every candidate
  // added (the setup's top_k must be 0), by id, with shared_score() as the far score.
  CandidateScores MemberScores();

  size_t MemoryBytes() const;

 private:
  class FarCursor;

  RankingSetup s_;
  std::vector<EntityId> near_;
  std::vector<EntityId> not_far_;
  std::vector<EntityId> far_apart_;
  uint64_t far_count_ = 0;
  bool pruned_ = false;
  uint32_t pruned_apart_ = 0;
  uint32_t filtered_ = 0;
  TopCandidates top_;
  float shared_score_ = 0;
  bool explicit_candidates_ = false;
  // With setup().answer: its score once added, and every other added candidate's.
  std::optional<float> answer_score_;
  std::vector<float> added_scores_;

  // Ranking::answer_rank, the far candidates sharing `far_score`.
  double AnswerRank(float far_score) const;
};

}  // namespace grail

#endif  // GRAIL_SERVER_SCORING_RANKING_H_
