#include "server/rpc/graph_service.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <deque>
#include <functional>
#include <limits>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "common/grpc_status.h"
#include "graph/vocabulary.h"
#include "server/wire/chunk_parsing.h"

#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#endif

namespace grail {

kg::v1::ScoredBy ScoredByToProto(ScoredBy scored_by) {
  static const auto* const values = [] {
    auto* v = new std::array<kg::v1::ScoredBy, kScorerCount>();
    for (ScoredBy scorer : kScorers) {
      kg::v1::ScoredBy value = kg::v1::SCORED_BY_UNSPECIFIED;
      kg::v1::ScoredBy_Parse(absl::StrCat("SCORED_BY_", absl::AsciiStrToUpper(ScorerName(scorer))),
                             &value);
      (*v)[static_cast<size_t>(scorer)] = value;
    }
    return v;
  }();
  return (*values)[static_cast<size_t>(scored_by)];
}

namespace {

using Clock = std::chrono::steady_clock;

// gRPC (Debian's, uninstrumented) passes a call from the thread that starts an operation on it
// (StartRead, StartWrite, Finish) to the thread that reports the operation done through its own
// atomics, which ThreadSanitizer cannot see. A reactor marks both ends, so that what our threads
// do to a call's state is checked against an order ThreadSanitizer knows; without it every
// hand-off between the writer or exports thread and gRPC's reads as a race. No code otherwise.
void HandToGrpc([[maybe_unused]] const void* reactor) {
#if defined(__SANITIZE_THREAD__)
  __tsan_release(const_cast<void*>(reactor));
#endif
}
void TakeFromGrpc([[maybe_unused]] const void* reactor) {
#if defined(__SANITIZE_THREAD__)
  __tsan_acquire(const_cast<void*>(reactor));
#endif
}

// ScoreTriplet's explanations: paths when max_paths is 0, and the most a call may ask for.
constexpr int kDefaultExplanationPaths = 3;
constexpr uint32_t kMaxExplanationPaths = 100;

grpc::Status InvalidArgument(std::string message) {
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, std::move(message));
}

// The call's deadline on the steady clock the engine schedules by.
Clock::time_point SteadyDeadline(std::chrono::system_clock::time_point deadline) {
  const auto system_now = std::chrono::system_clock::now();
  // gRPC reports "no deadline" as a time far in the future.
  if (deadline - system_now > std::chrono::hours(24 * 365)) return Clock::time_point::max();
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(deadline - system_now);
}

// gRPC cancels a call when its deadline passes, and the engine, comparing its clock with a
// converted copy of that deadline, may see the cancellation a moment before its own copy
// expires: a CANCELLED end is the deadline's (what the client sees) when the deadline has
// passed or is this close.
constexpr auto kDeadlineSlack = std::chrono::milliseconds(20);

grpc::Status WithDeadlineReason(const grpc::Status& status,
                                const grpc::CallbackServerContext& context) {
  if (status.error_code() != grpc::StatusCode::CANCELLED ||
      std::chrono::system_clock::now() + kDeadlineSlack < context.deadline()) {
    return status;
  }
  return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                      "the call's deadline passed before it finished");
}

// Checks a name by the store's rule (graph/vocabulary.h): a name the store would refuse
// cannot be in the graph, and a long one would otherwise travel on into messages; `what`
// names the field.
grpc::Status CheckName(const std::string& name, absl::string_view what, uint32_t max_bytes) {
  return ToGrpcStatus(ValidateName(name, what, max_bytes, "--max-name-bytes"));
}

// Checks the three names of a triple; `where` prefixes the message.
grpc::Status ValidateTriple(const kg::v1::Triple& t, absl::string_view where, uint32_t max_bytes) {
  grpc::Status status = CheckName(t.head(), absl::StrCat(where, ".head"), max_bytes);
  if (status.ok()) status = CheckName(t.relation(), absl::StrCat(where, ".relation"), max_bytes);
  if (status.ok()) status = CheckName(t.tail(), absl::StrCat(where, ".tail"), max_bytes);
  return status;
}

void FillScore(const FactScore& s, ScoredBy scored_by, uint64_t sequence,
               const std::string& model_version, kg::v1::ScoreTripletResponse* out) {
  out->set_score(s.score);
  out->set_probability(static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(s.score)))));
  out->set_known_fact(s.known_fact);
  out->set_subgraph_nodes(static_cast<uint32_t>(s.subgraph_nodes));
  out->set_subgraph_edges(static_cast<uint32_t>(s.subgraph_edges));
  // A path-family score says its pass's version (an earlier one where the call accepted it).
  out->set_graph_sequence(s.graph_sequence != 0 ? s.graph_sequence : sequence);
  out->set_model_version(model_version);
  out->set_scored_by(ScoredByToProto(scored_by));
  out->set_pruned(s.pruned);
}

// A call's kg.v1.Staleness, never accepting a pass before its min_graph_sequence.
Staleness ToStaleness(const kg::v1::Staleness& bound, uint64_t min_graph_sequence) {
  Staleness staleness;
  staleness.max_sequences = bound.max_sequences();
  staleness.max_age = std::chrono::milliseconds(bound.max_milliseconds());
  staleness.min_sequence = min_graph_sequence;
  return staleness;
}

void FillModelInfo(const ServedModel& served, kg::v1::ModelInfo* info) {
  const ModelSummary summary = served.Summary();
  info->set_path(served.path());
  info->set_format(summary.format);
  for (const std::string& r : served.relations()) info->add_relations(r);
  info->set_hops(summary.hops);
  info->set_layers(summary.layers);
  info->set_dim(summary.dim);
  info->set_parameters(summary.parameters);
  info->set_training_fingerprint(summary.training_fingerprint);
  info->set_device(summary.device);
  info->set_version(served.version());
  info->set_generation(served.generation());
  info->set_loaded_at_unix_seconds(served.loaded_at_unix_seconds());
  for (const KgeMemberSummary& member : summary.kge_members) {
    kg::v1::KgeModelInfo* out = info->add_kge_models();
    out->set_kind(member.kind);
    out->set_dim(static_cast<uint32_t>(member.dim));
    out->set_entities(member.entities);
    out->set_relations(static_cast<uint32_t>(member.relations));
    out->set_weight(member.weight);
  }
}

}  // namespace

// Runs tasks one at a time, in order of arrival, on its own thread: the chunks of
// AddTriples and RemoveTriples (one writer), and model reloads (which take seconds).
class KnowledgeGraphService::TaskThread {
 public:
  TaskThread() : thread_([this] { Run(); }) {}
  ~TaskThread() {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    thread_.join();
  }
  void Post(std::function<void()> task) {
    absl::MutexLock lock(&mu_);
    tasks_.push_back(std::move(task));
  }

 private:
  void Run() {
    for (;;) {
      std::function<void()> task;
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(
            +[](TaskThread* w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(w->mu_) {
              return w->stopping_ || !w->tasks_.empty();
            },
            this));
        if (tasks_.empty()) return;  // stopping, and nothing left
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
    }
  }

  absl::Mutex mu_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

// One unary call in progress. It holds no thread: whoever has the answer calls Reply().
class KnowledgeGraphService::UnaryCall final : public grpc::ServerUnaryReactor {
 public:
  UnaryCall(KnowledgeGraphService* service, absl::string_view method,
            grpc::CallbackServerContext* context)
      : service_(service),
        method_(method),
        context_(context),
        control_(std::make_shared<CallControl>(SteadyDeadline(context->deadline()))) {
    service_->in_flight_.fetch_add(1, std::memory_order_relaxed);
  }

  const std::shared_ptr<CallControl>& control() const { return control_; }
  grpc::CallbackServerContext* context() const { return context_; }
  absl::string_view method() const { return method_; }

  // Ends the call. Exactly once.
  void Reply(const grpc::Status& status) {
    const grpc::Status final_status = WithDeadlineReason(status, *context_);
    service_->observer_->OnCall(method_, static_cast<int>(final_status.error_code()),
                                std::chrono::duration<double>(Clock::now() - start_).count());
    // The caller's slot is free once its answer is given, not when gRPC later reports the
    // call done: a client that waits for each answer before its next call never finds its
    // own finished calls still counted (an answer from the pass cache comes back well before
    // OnDone runs on a busy server).
    service_->LeaveCaller(&caller_);
    HandToGrpc(this);
    Finish(final_status);
  }
  void Reply(const absl::Status& status) { Reply(ToGrpcStatus(status)); }

  // The call was admitted for `caller` (KnowledgeGraphService::Admit): its calls in
  // flight count it until it is answered, and its work counts in the engine's caller shares.
  void Admitted(std::string caller) {
    control_->set_caller(caller);
    caller_ = std::move(caller);
  }

  void OnCancel() override { control_->Cancel(); }
  void OnDone() override {
    TakeFromGrpc(this);
    service_->in_flight_.fetch_sub(1, std::memory_order_relaxed);
    service_->LeaveCaller(&caller_);  // a call never answered; a no-op once answered
    delete this;
  }

 private:
  KnowledgeGraphService* const service_;
  const absl::string_view method_;
  grpc::CallbackServerContext* const context_;
  const Clock::time_point start_ = Clock::now();
  const std::shared_ptr<CallControl> control_;
  std::string caller_;
};

// What differs between the two chunk streams, AddTriples and RemoveTriples.
template <typename Request>
struct ChunkStreamKind;

template <>
struct ChunkStreamKind<kg::v1::AddTriplesRequest> {
  using Ack = kg::v1::AddTriplesAck;
  static constexpr absl::string_view kMethod = "AddTriples";
  static constexpr bool kEvaluated = true;  // its facts are what online evaluation ranks
  static int Size(const kg::v1::AddTriplesRequest& chunk) { return chunk.triples_size(); }
  // What the chunk holds, for messages: "lines A-B".
  static std::string Contents(const kg::v1::AddTriplesRequest& chunk, uint64_t first_line) {
    return absl::StrCat("lines ", first_line, "-", first_line + chunk.triples_size() - 1);
  }
  static absl::StatusOr<ChunkResult> Apply(LinkPredictor& predictor, Replicator* replicator,
                                           absl::Span<const NamedTriple> facts,
                                           const kg::v1::AddTriplesRequest& chunk) {
    if (replicator == nullptr) return predictor.Add(facts);
    // Validated here, so that the log holds only chunks every replica takes.
    if (absl::Status valid = predictor.store().CheckChunk(facts, {}, {}, /*adding=*/true);
        !valid.ok()) {
      return valid;
    }
    return replicator->Append(ChunkOp::kAdd, chunk.SerializeAsString());
  }
  static void Report(ServiceObserver& observer, const ChunkResult& result, size_t facts,
                     double seconds) {
    observer.OnChunkStored(result, facts, seconds);
  }
  static void Fill(const ChunkResult& result, Ack* ack) {
    ack->set_facts_added(result.facts_added);
    ack->set_duplicate_facts(result.duplicate_facts);
    ack->set_entities_created(result.entities_created);
    ack->set_relations_created(result.relations_created);
  }
};

template <>
struct ChunkStreamKind<kg::v1::RemoveTriplesRequest> {
  using Ack = kg::v1::RemoveTriplesAck;
  static constexpr absl::string_view kMethod = "RemoveTriples";
  static constexpr bool kEvaluated = false;
  static int Size(const kg::v1::RemoveTriplesRequest& chunk) {
    return chunk.triples_size() + chunk.entities_size() + chunk.relations_size();
  }
  // What the chunk holds, for messages: "lines A-B, N entities, M relations" (the parts it
  // has).
  static std::string Contents(const kg::v1::RemoveTriplesRequest& chunk, uint64_t first_line) {
    std::vector<std::string> parts;
    if (chunk.triples_size() > 0) {
      parts.push_back(
          absl::StrCat("lines ", first_line, "-", first_line + chunk.triples_size() - 1));
    }
    if (chunk.entities_size() > 0)
      parts.push_back(absl::StrCat(chunk.entities_size(), " entities"));
    if (chunk.relations_size() > 0) {
      parts.push_back(absl::StrCat(chunk.relations_size(), " relations"));
    }
    return absl::StrJoin(parts, ", ");
  }
  static absl::StatusOr<ChunkResult> Apply(LinkPredictor& predictor, Replicator* replicator,
                                           absl::Span<const NamedTriple> facts,
                                           const kg::v1::RemoveTriplesRequest& chunk) {
    const std::vector<std::string> entities(chunk.entities().begin(), chunk.entities().end());
    const std::vector<std::string> relations(chunk.relations().begin(), chunk.relations().end());
    if (replicator == nullptr) return predictor.Remove(facts, entities, relations);
    if (absl::Status valid =
            predictor.store().CheckChunk(facts, entities, relations, /*adding=*/false);
        !valid.ok()) {
      return valid;
    }
    return replicator->Append(ChunkOp::kRemove, chunk.SerializeAsString());
  }
  static void Report(ServiceObserver& observer, const ChunkResult& result, size_t facts,
                     double seconds) {
    observer.OnChunkRemoved(result, facts, seconds);
  }
  static void Fill(const ChunkResult& result, Ack* ack) {
    ack->set_facts_removed(result.facts_removed);
    ack->set_facts_not_present(result.facts_not_present);
    ack->set_entities_removed(result.entities_removed);
    ack->set_entities_not_present(result.entities_not_present);
    ack->set_relations_removed(result.relations_removed);
    ack->set_relations_not_present(result.relations_not_present);
  }
};

// One AddTriples or RemoveTriples stream: read a chunk, apply it on the writer thread,
// acknowledge it, read the next; a bad chunk ends the stream naming its line.
template <typename Request>
class KnowledgeGraphService::ChunkStreamCall final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  using Kind = ChunkStreamKind<Request>;

  ChunkStreamCall(KnowledgeGraphService* service, grpc::CallbackServerContext* context)
      : service_(service), context_(context) {
    service_->in_flight_.fetch_add(1, std::memory_order_relaxed);
    const grpc::Status admitted =
        service_->Admit(context_, Kind::kMethod, Scope::kWrite, &predictor_, &caller_);
    if (!admitted.ok()) {
      End(admitted);
      return;
    }
    HandToGrpc(this);
    StartRead(&in_);
  }

  void OnReadDone(bool ok) override {
    TakeFromGrpc(this);
    if (!ok) {  // the client closed its side, or the call was cancelled
      End(context_->IsCancelled()
              ? grpc::Status(grpc::StatusCode::CANCELLED, "the client cancelled the stream")
              : grpc::Status::OK);
      return;
    }
    chunk_.Clear();
    if (const absl::Status parsed = ParseChunk(in_, &chunk_); !parsed.ok()) {
      EndRejected(grpc::StatusCode::INVALID_ARGUMENT,
                  absl::StrCat(parsed.message(), " (chunk ", index_, ")"));
      return;
    }
    if (service_->draining_.load()) {
      End(grpc::Status(
          grpc::StatusCode::UNAVAILABLE,
          absl::StrCat("the server is shutting down; chunk ", index_, " was not applied, the ",
                       index_, " chunks acknowledged before it are")));
      return;
    }
    const uint64_t first_line = chunk_.first_line() > 0 ? chunk_.first_line() : 1;
    // Line numbers first_line .. first_line + size - 1 must exist: no wrap-around in messages.
    if (first_line > std::numeric_limits<uint64_t>::max() - chunk_.triples_size()) {
      EndRejected(grpc::StatusCode::INVALID_ARGUMENT,
                  absl::StrCat("chunk ", index_, ": first_line ", chunk_.first_line(),
                               " leaves no room for its ", chunk_.triples_size(), " lines"));
      return;
    }
    if (static_cast<uint32_t>(Kind::Size(chunk_)) > service_->limits_.max_chunk_facts) {
      EndRejected(grpc::StatusCode::RESOURCE_EXHAUSTED,
                  absl::StrCat("chunk ", index_, " (", Kind::Contents(chunk_, first_line), ") has ",
                               Kind::Size(chunk_), " items; the limit is ",
                               service_->limits_.max_chunk_facts, " (--max-chunk-facts)"));
      return;
    }
    ack_.Clear();
    ack_.set_chunk_index(index_);
    if (Kind::Size(chunk_) == 0) {
      // Nothing to apply; acknowledge so that the client's count of acks stays in step.
      ack_.set_sequence(predictor_->store().Snapshot()->sequence());
      WriteAck();
      return;
    }
    service_->writer_->Post([this] { Apply(); });
  }

  void OnWriteDone(bool ok) override {
    TakeFromGrpc(this);
    if (!ok) {
      // The client is gone; the chunk is applied all the same (it resends unacked chunks).
      End(grpc::Status(grpc::StatusCode::CANCELLED, "the client went away"));
      return;
    }
    ++index_;
    HandToGrpc(this);
    StartRead(&in_);
  }

  void OnDone() override {
    TakeFromGrpc(this);
    service_->in_flight_.fetch_sub(1, std::memory_order_relaxed);
    service_->LeaveCaller(&caller_);  // a stream never ended; a no-op once it was
    delete this;
  }

 private:
  // On the writer thread.
  void Apply() {
    const uint64_t first_line = chunk_.first_line() > 0 ? chunk_.first_line() : 1;
    facts_.clear();
    for (const kg::v1::Triple& t : chunk_.triples()) facts_.push_back(ToNamed(t));
    const Clock::time_point start = Clock::now();
    OnlineEvaluator* const online = service_->online_;
    std::shared_ptr<OnlineEvaluator::Chunk> evaluated;
    if constexpr (Kind::kEvaluated) {
      if (online != nullptr) evaluated = online->BeforeApply(facts_);
    }
    absl::StatusOr<ChunkResult> result =
        Kind::Apply(*predictor_, service_->replicator_, facts_, chunk_);
    if (evaluated != nullptr) online->AfterApply(evaluated, result.ok());
    if (!result.ok()) {
      const std::optional<size_t> position = RejectedFactIndex(result.status());
      const grpc::Status status = ToGrpcStatus(result.status());
      if (!position) {  // a failed write, a full disk, a bad entities[N]: the chunk as a whole
        EndRejected(status.error_code(),
                    absl::StrCat("chunk ", index_, ": ", status.error_message()));
        return;
      }
      // The store says "fact N: reason"; the client knows lines, not positions.
      absl::string_view reason = result.status().message();
      absl::ConsumePrefix(&reason, absl::StrCat("fact ", *position, ": "));
      EndRejected(status.error_code(), absl::StrCat("line ", first_line + *position, ": ", reason,
                                                    " (chunk ", index_, ", fact ", *position, ")"));
      return;
    }
    Kind::Report(*service_->observer_, *result, facts_.size(),
                 std::chrono::duration<double>(Clock::now() - start).count());
    ack_.set_sequence(result->sequence);
    Kind::Fill(*result, &ack_);
    WriteAck();
  }

  void WriteAck() {
    out_.Clear();
    bool own_buffer = false;
    const grpc::Status serialized =
        grpc::SerializationTraits<typename Kind::Ack>::Serialize(ack_, &out_, &own_buffer);
    if (!serialized.ok()) return End(serialized);
    HandToGrpc(this);
    StartWrite(&out_);
  }

  // Ends the stream refusing the current chunk: `what` went wrong, then what is stored.
  void EndRejected(grpc::StatusCode code, absl::string_view what) {
    End(grpc::Status(code, absl::StrCat(what, "; nothing of this chunk was applied, the ", index_,
                                        " chunks acknowledged before it are")));
  }

  void End(const grpc::Status& status) {
    const grpc::Status final_status = WithDeadlineReason(status, *context_);
    service_->observer_->OnCall(Kind::kMethod, static_cast<int>(final_status.error_code()),
                                std::chrono::duration<double>(Clock::now() - start_).count());
    service_->LeaveCaller(&caller_);  // free once answered, as for a unary call
    HandToGrpc(this);
    Finish(final_status);
  }

  std::string caller_;  // counted in the service's per-caller calls from admission to End
  KnowledgeGraphService* const service_;
  grpc::CallbackServerContext* const context_;
  LinkPredictor* predictor_ = nullptr;
  const Clock::time_point start_ = Clock::now();
  uint64_t index_ = 0;
  grpc::ByteBuffer in_, out_;
  Request chunk_;
  typename Kind::Ack ack_;
  std::vector<NamedTriple> facts_;
};

// One ExportTriples stream: the store's export read a page at a time on the exports thread,
// each page written before the next is read, so a stream holds one page whatever the graph's
// size, and concurrent streams take turns on that thread.
class KnowledgeGraphService::ExportCall final
    : public grpc::ServerWriteReactor<kg::v1::ExportTriplesResponse> {
 public:
  static constexpr absl::string_view kMethod = "ExportTriples";
  static constexpr uint32_t kDefaultPageFacts = 10000;
  static constexpr size_t kPageBytes = size_t{1} << 20;  // of names: well under gRPC's 4 MiB

  ExportCall(KnowledgeGraphService* service, grpc::CallbackServerContext* context,
             const kg::v1::ExportTriplesRequest& request)
      : service_(service), context_(context), since_(request.since_sequence()) {
    service_->in_flight_.fetch_add(1, std::memory_order_relaxed);
    grpc::Status admitted =
        service_->Admit(context_, kMethod, Scope::kWrite, &predictor_, &caller_);
    if (admitted.ok() && request.max_page_facts() > service_->limits_.max_chunk_facts) {
      admitted = InvalidArgument(absl::StrCat(
          "max_page_facts ", request.max_page_facts(), " is above the server's limit of ",
          service_->limits_.max_chunk_facts, " (--max-chunk-facts)"));
    }
    if (!admitted.ok()) {
      End(admitted);
      return;
    }
    page_facts_ = request.max_page_facts() > 0 ? request.max_page_facts() : kDefaultPageFacts;
    service_->exports_->Post([this] { Start(); });
  }

  void OnWriteDone(bool ok) override {
    TakeFromGrpc(this);
    if (!ok) return End(grpc::Status(grpc::StatusCode::CANCELLED, "the client went away"));
    if (finished_) return End(grpc::Status::OK);
    service_->exports_->Post([this] { NextPage(); });
  }

  void OnDone() override {
    TakeFromGrpc(this);
    service_->in_flight_.fetch_sub(1, std::memory_order_relaxed);
    service_->LeaveCaller(&caller_);  // a stream never ended; a no-op once it was
    delete this;
  }

 private:
  // On the exports thread, like NextPage.
  void Start() {
    absl::StatusOr<std::unique_ptr<FactExport>> exported = predictor_->store().Export(since_);
    if (!exported.ok()) return End(ToGrpcStatus(exported.status()));
    export_ = std::move(*exported);
    NextPage();
  }

  void NextPage() {
    if (context_->IsCancelled()) {
      return End(grpc::Status(grpc::StatusCode::CANCELLED, "the client cancelled the export"));
    }
    if (service_->draining_.load()) {
      return End(grpc::Status(
          grpc::StatusCode::UNAVAILABLE,
          absl::StrCat("the server is shutting down; the export of sequence ", export_->sequence(),
                       " is incomplete (", sent_, " facts sent)")));
    }
    absl::StatusOr<std::vector<ExportedFact>> page = export_->Next(page_facts_, kPageBytes);
    if (!page.ok()) return End(ToGrpcStatus(page.status()));
    if (page->empty() && sent_messages_ > 0) return End(grpc::Status::OK);
    response_.Clear();
    response_.set_graph_sequence(export_->sequence());
    for (ExportedFact& f : *page) {
      kg::v1::Triple* t = response_.add_triples();
      t->set_head(std::move(f.fact.head));
      t->set_relation(std::move(f.fact.relation));
      t->set_tail(std::move(f.fact.tail));
      response_.add_sequences(f.sequence);
    }
    finished_ = page->empty();  // an empty export: one message, saying its version
    sent_ += page->size();
    ++sent_messages_;
    service_->observer_->OnFactsExported(page->size());
    HandToGrpc(this);
    StartWrite(&response_);
  }

  void End(const grpc::Status& status) {
    export_.reset();  // its RocksDB snapshot goes now, not when gRPC reports the call done
    const grpc::Status final_status = WithDeadlineReason(status, *context_);
    service_->observer_->OnCall(kMethod, static_cast<int>(final_status.error_code()),
                                std::chrono::duration<double>(Clock::now() - start_).count());
    service_->LeaveCaller(&caller_);
    HandToGrpc(this);
    Finish(final_status);
  }

  KnowledgeGraphService* const service_;
  grpc::CallbackServerContext* const context_;
  const uint64_t since_;
  const Clock::time_point start_ = Clock::now();
  std::string caller_;
  LinkPredictor* predictor_ = nullptr;
  uint32_t page_facts_ = kDefaultPageFacts;
  std::unique_ptr<FactExport> export_;
  kg::v1::ExportTriplesResponse response_;
  uint64_t sent_ = 0;
  uint64_t sent_messages_ = 0;
  bool finished_ = false;
};

KnowledgeGraphService::KnowledgeGraphService(const ServiceLimits& limits, ServiceObserver* observer,
                                             const AccessTokens* tokens)
    : limits_(limits),
      observer_(observer != nullptr ? observer : &default_observer_),
      tokens_(tokens),
      writer_(std::make_unique<TaskThread>()),
      reloads_(std::make_unique<TaskThread>()),
      exports_(std::make_unique<TaskThread>()) {}

KnowledgeGraphService::~KnowledgeGraphService() = default;

void KnowledgeGraphService::Activate(LinkPredictor* predictor, ModelReloader* reloader,
                                     const ServedModelInfo& info, uint32_t max_batch_size) {
  reloader_ = reloader;
  info_ = info;
  max_batch_size_ = max_batch_size;
  predictor_.store(predictor, std::memory_order_release);
}

grpc::Status KnowledgeGraphService::Admit(grpc::CallbackServerContext* context,
                                          absl::string_view method, Scope needed,
                                          LinkPredictor** predictor, std::string* caller) {
  std::string name;
  if (tokens_ != nullptr) {
    std::optional<absl::string_view> authorization;
    const auto& metadata = context->client_metadata();
    if (auto it = metadata.find("authorization"); it != metadata.end()) {
      authorization = absl::string_view(it->second.data(), it->second.size());
    }
    AccessDecision decision = tokens_->Check(authorization, needed);
    observer_->OnAccess(method, decision.outcome, decision.token_name);
    if (!decision.status.ok()) return ToGrpcStatus(decision.status);
    name = absl::StrCat("token ", decision.token_name);
  } else {
    name = absl::StrCat("peer ", context->peer());  // one connection
  }
  *predictor = predictor_.load(std::memory_order_acquire);
  if (*predictor == nullptr) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        "the server is still loading its model and graph");
  }
  // Admitted calls only: calls being refused (a flood of them) do not crowd out others.
  // A caller over its share waits for its own calls; other callers are still admitted.
  const int64_t share = CallerShare(limits_.max_calls_in_flight, limits_.max_caller_share);
  absl::MutexLock lock(&callers_mu_);
  int64_t& mine = calls_by_caller_[name];
  auto refuse = [&](absl::string_view limit, std::string message) {
    if (mine == 0) calls_by_caller_.erase(name);
    observer_->OnServiceLimit(limit);
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, std::move(message));
  };
  if (limits_.max_caller_share < 1 && mine + 1 > share) {
    return refuse("max_caller_share",
                  absl::StrCat("this caller (", name, ") has ", mine,
                               " calls in flight; one caller may have ", share,
                               " (--max-caller-share of --max-calls-in-flight); retry when "
                               "its earlier calls have finished"));
  }
  if (admitted_calls_ + 1 > static_cast<int64_t>(limits_.max_calls_in_flight)) {
    return refuse("max_calls_in_flight",
                  absl::StrCat("the server is busy: ", admitted_calls_,
                               " calls are in flight; the limit is ", limits_.max_calls_in_flight,
                               " (--max-calls-in-flight); retry later, with backoff"));
  }
  ++admitted_calls_;
  ++mine;
  *caller = std::move(name);
  return grpc::Status::OK;
}

grpc::Status KnowledgeGraphService::Admit(UnaryCall* call, Scope needed,
                                          LinkPredictor** predictor) {
  std::string caller;
  grpc::Status status = Admit(call->context(), call->method(), needed, predictor, &caller);
  if (status.ok()) call->Admitted(std::move(caller));
  return status;
}

void KnowledgeGraphService::LeaveCaller(std::string* caller) {
  if (caller->empty()) return;
  absl::MutexLock lock(&callers_mu_);
  --admitted_calls_;
  const auto it = calls_by_caller_.find(*caller);
  if (it != calls_by_caller_.end() && --it->second <= 0) calls_by_caller_.erase(it);
  caller->clear();
}

grpc::ServerUnaryReactor* KnowledgeGraphService::ScoreTriplet(
    grpc::CallbackServerContext* context, const kg::v1::ScoreTripletRequest* request,
    kg::v1::ScoreTripletResponse* response) {
  auto* call = new UnaryCall(this, "ScoreTriplet", context);
  LinkPredictor* predictor;
  grpc::Status status = Admit(call, Scope::kRead, &predictor);
  if (status.ok()) status = ValidateTriple(request->triple(), "triple", limits_.max_name_bytes);
  if (status.ok() && request->max_paths() > kMaxExplanationPaths) {
    status = InvalidArgument(absl::StrCat("max_paths is ", request->max_paths(), "; at most ",
                                          kMaxExplanationPaths, " paths are returned"));
  }
  if (!status.ok()) {
    call->Reply(status);
    return call;
  }
  const int explain_paths = !request->explain()        ? 0
                            : request->max_paths() > 0 ? static_cast<int>(request->max_paths())
                                                       : kDefaultExplanationPaths;
  const Staleness staleness = ToStaleness(request->max_staleness(), request->min_graph_sequence());
  AfterSequence(call, predictor, request->min_graph_sequence(),
                [this, call, predictor, request, response, explain_paths, staleness] {
                  predictor->Score(
                      {ToNamed(request->triple())}, call->control(),
                      [this, call, response](absl::StatusOr<ScoredFacts> scored) {
                        if (!scored.ok()) return call->Reply(scored.status());
                        FillScore(scored->scores[0], scored->scored_by[0], scored->graph_sequence,
                                  scored->model_version, response);
                        observer_->OnScoresReturned(scored->scored_by[0], 1);
                        if (scored->scores[0].pruned) observer_->OnPrunedAnswer();
                        if (!scored->paths.empty()) {
                          for (const NamedPath& path : scored->paths[0]) {
                            kg::v1::ExplanationPath* out = response->add_paths();
                            out->set_rule(path.rule);
                            out->set_weight(path.weight);
                            for (double w : path.layer_weights) out->add_layer_weights(w);
                            for (const NamedPathStep& step : path.steps) {
                              kg::v1::PathStep* s = out->add_steps();
                              s->set_from_entity(step.from);
                              s->set_to_entity(step.to);
                              s->set_relation(step.relation);
                              s->set_inverse(step.inverse);
                              for (float a : step.attention) s->add_attention(a);
                            }
                          }
                        }
                        call->Reply(grpc::Status::OK);
                      },
                      explain_paths, staleness);
                });
  return call;
}

grpc::ServerUnaryReactor* KnowledgeGraphService::ScoreTriplets(
    grpc::CallbackServerContext* context, const kg::v1::ScoreTripletsRequest* request,
    kg::v1::ScoreTripletsResponse* response) {
  auto* call = new UnaryCall(this, "ScoreTriplets", context);
  LinkPredictor* predictor;
  grpc::Status status = Admit(call, Scope::kRead, &predictor);
  if (status.ok() && static_cast<uint32_t>(request->triples_size()) > limits_.max_request_triples) {
    status =
        grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                     absl::StrCat(request->triples_size(), " triples in one call; the limit is ",
                                  limits_.max_request_triples, " (--max-request-triples)"));
  }
  std::vector<NamedTriple> facts;
  facts.reserve(request->triples_size());
  for (int i = 0; status.ok() && i < request->triples_size(); ++i) {
    status = ValidateTriple(request->triples(i), absl::StrCat("triples[", i, "]"),
                            limits_.max_name_bytes);
    facts.push_back(ToNamed(request->triples(i)));
  }
  if (!status.ok()) {
    call->Reply(status);
    return call;
  }
  const Staleness staleness = ToStaleness(request->max_staleness(), request->min_graph_sequence());
  AfterSequence(call, predictor, request->min_graph_sequence(),
                [this, call, predictor, response, staleness, facts = std::move(facts)]() mutable {
                  predictor->Score(
                      std::move(facts), call->control(),
                      [this, call, response](absl::StatusOr<ScoredFacts> scored) {
                        if (!scored.ok()) return call->Reply(scored.status());
                        uint64_t oldest = scored->graph_sequence;
                        for (size_t i = 0; i < scored->scores.size(); ++i) {
                          kg::v1::ScoreTripletResponse* result = response->add_results();
                          FillScore(scored->scores[i], scored->scored_by[i], scored->graph_sequence,
                                    scored->model_version, result);
                          oldest = std::min<uint64_t>(oldest, result->graph_sequence());
                          observer_->OnScoresReturned(scored->scored_by[i], 1);
                        }
                        response->set_graph_sequence(oldest);
                        response->set_model_version(scored->model_version);
                        call->Reply(grpc::Status::OK);
                      },
                      /*explain_paths=*/0, staleness);
                });
  return call;
}

void KnowledgeGraphService::Rank(UnaryCall* call, RankQuery query,
                                 const kg::v1::RankOptions& options, uint64_t min_graph_sequence,
                                 kg::v1::RankResponse* response) {
  LinkPredictor* predictor;
  grpc::Status status = Admit(call, Scope::kRead, &predictor);
  if (!status.ok()) return call->Reply(status);
  status = CheckName(query.fixed, query.rank_tails ? "head" : "tail", limits_.max_name_bytes);
  if (status.ok()) status = CheckName(query.relation, "relation", limits_.max_name_bytes);
  if (!status.ok()) return call->Reply(status);
  if (static_cast<uint32_t>(options.candidates_size()) > limits_.max_candidates) {
    return call->Reply(
        grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                     absl::StrCat(options.candidates_size(),
                                  " candidates in one call; the limit is ", limits_.max_candidates,
                                  " (--max-candidates; send none to rank every entity)")));
  }
  for (int i = 0; i < options.candidates_size(); ++i) {
    status = CheckName(options.candidates(i), absl::StrCat("options.candidates[", i, "]"),
                       limits_.max_name_bytes);
    if (!status.ok()) return call->Reply(status);
  }
  query.candidates.assign(options.candidates().begin(), options.candidates().end());
  query.top_k = options.top_k();
  query.filter_known_facts = options.filter_known_facts();
  query.budget = {options.max_visited_nodes(), options.max_visited_edges()};
  AfterSequence(
      call, predictor, min_graph_sequence,
      [this, call, predictor, response, query = std::move(query)]() mutable {
        predictor->Rank(
            std::move(query), call->control(),
            [this, call, response](absl::StatusOr<Ranking> ranking) {
              if (!ranking.ok()) return call->Reply(ranking.status());
              response->mutable_ranked()->Reserve(static_cast<int>(ranking->ranked.size()));
              std::array<size_t, kScorerCount> by{};  // entries per scorer
              for (RankedEntity& r : ranking->ranked) {
                kg::v1::RankedEntity* out = response->add_ranked();
                out->set_entity(std::move(r.entity));
                out->set_score(r.score);
                out->set_rank(r.rank);
                out->set_known_fact(r.known_fact);
                out->set_scored_by(ScoredByToProto(r.scored_by));
                out->set_pruned(r.pruned);
                ++by[static_cast<size_t>(r.scored_by)];
              }
              for (ScoredBy scorer : kScorers) {
                const size_t count = by[static_cast<size_t>(scorer)];
                if (count > 0) observer_->OnScoresReturned(scorer, count);
              }
              response->set_candidates_scored(ranking->candidates_scored);
              response->set_candidates_filtered(ranking->candidates_filtered);
              response->set_candidates_shared_score(ranking->candidates_shared_score);
              response->set_candidates_pruned(ranking->candidates_pruned);
              if (ranking->candidates_pruned > 0) observer_->OnPrunedAnswer();
              response->set_graph_sequence(ranking->graph_sequence);
              response->set_model_version(std::move(ranking->model_version));
              call->Reply(grpc::Status::OK);
            });
      });
}

grpc::ServerUnaryReactor* KnowledgeGraphService::RankTails(grpc::CallbackServerContext* context,
                                                           const kg::v1::RankTailsRequest* request,
                                                           kg::v1::RankResponse* response) {
  auto* call = new UnaryCall(this, "RankTails", context);
  RankQuery query;
  query.rank_tails = true;
  query.fixed = request->head();
  query.relation = request->relation();
  Rank(call, std::move(query), request->options(), request->min_graph_sequence(), response);
  return call;
}

grpc::ServerUnaryReactor* KnowledgeGraphService::RankHeads(grpc::CallbackServerContext* context,
                                                           const kg::v1::RankHeadsRequest* request,
                                                           kg::v1::RankResponse* response) {
  auto* call = new UnaryCall(this, "RankHeads", context);
  RankQuery query;
  query.rank_tails = false;
  query.fixed = request->tail();
  query.relation = request->relation();
  Rank(call, std::move(query), request->options(), request->min_graph_sequence(), response);
  return call;
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* KnowledgeGraphService::AddTriples(
    grpc::CallbackServerContext* context) {
  return new ChunkStreamCall<kg::v1::AddTriplesRequest>(this, context);
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* KnowledgeGraphService::RemoveTriples(
    grpc::CallbackServerContext* context) {
  return new ChunkStreamCall<kg::v1::RemoveTriplesRequest>(this, context);
}

grpc::ServerUnaryReactor* KnowledgeGraphService::ReloadModel(
    grpc::CallbackServerContext* context, const kg::v1::ReloadModelRequest* request,
    kg::v1::ReloadModelResponse* response) {
  auto* call = new UnaryCall(this, "ReloadModel", context);
  LinkPredictor* predictor;
  grpc::Status status = Admit(call, Scope::kAdmin, &predictor);
  if (status.ok() && reloader_ == nullptr) {
    status = grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "this server cannot reload its model");
  }
  if (status.ok() && !request->path().empty()) {
    status = ToGrpcStatus(ValidateName(request->path(), "path", 4096));
  }
  if (!status.ok()) {
    call->Reply(status);
    return call;
  }
  // Loading and warming up take seconds: not on a gRPC thread.
  // Its place among reloads is taken now: of those waiting behind a reload in progress, only
  // the newest runs.
  const uint64_t queued = reloader_->Queue();
  reloads_->Post([this, call, path = request->path(), response, queued] {
    // Applied only while the caller still waits, with a margin for the answer's way back.
    auto still_wanted = [call] {
      return !call->control()->Stopped(Clock::now() + std::chrono::milliseconds(100));
    };
    absl::StatusOr<ReloadOutcome> outcome = reloader_->Reload(path, still_wanted, queued);
    if (!outcome.ok()) return call->Reply(outcome.status());
    FillModelInfo(*outcome->model, response->mutable_model());
    response->set_previous_version(outcome->previous_version);
    response->set_load_seconds(outcome->load_seconds);
    response->set_warmup_seconds(outcome->warmup_seconds);
    call->Reply(grpc::Status::OK);
  });
  return call;
}

void KnowledgeGraphService::ReloadFromSignal() {
  if (reloader_ == nullptr) return;
  // On the reload thread: the signal loop stays free to see SIGTERM whatever a load does.
  const uint64_t queued = reloader_->Queue();
  reloads_->Post([this, queued] { reloader_->Reload("", nullptr, queued).IgnoreError(); });
}

grpc::ServerUnaryReactor* KnowledgeGraphService::GetStats(grpc::CallbackServerContext* context,
                                                          const kg::v1::GetStatsRequest* request,
                                                          kg::v1::GetStatsResponse* response) {
  auto* call = new UnaryCall(this, "GetStats", context);
  LinkPredictor* predictor;
  const grpc::Status status = Admit(call, Scope::kRead, &predictor);
  if (!status.ok()) {
    call->Reply(status);
    return call;
  }
  AfterSequence(call, predictor, request->min_graph_sequence(), [this, call, predictor, response] {
    const std::shared_ptr<const GraphSnapshot> graph = predictor->store().Snapshot();
    response->set_entities(graph->num_live_entities());
    response->set_relations(graph->num_live_relations());
    response->set_facts(graph->num_facts());
    response->set_graph_sequence(graph->sequence());
    FillModelInfo(*predictor->served_model(), response->mutable_model());
    response->set_max_batch_size(max_batch_size_);
    response->set_max_chunk_facts(limits_.max_chunk_facts);
    response->set_max_request_triples(limits_.max_request_triples);
    response->set_uptime_seconds(std::chrono::duration<double>(Clock::now() - started_).count());
    response->set_version(info_.version);
    call->Reply(grpc::Status::OK);
  });
  return call;
}

void KnowledgeGraphService::AfterSequence(UnaryCall* call, LinkPredictor* predictor,
                                          uint64_t min_graph_sequence, std::function<void()> run) {
  if (min_graph_sequence == 0) return run();
  // The answer must reach the client before its deadline does, or it would only see
  // DEADLINE_EXCEEDED instead of how far behind this replica is: give up a little earlier.
  const Clock::time_point now = Clock::now();
  Clock::time_point deadline = call->control()->deadline();
  if (deadline != Clock::time_point::max()) {
    deadline -= std::min<Clock::duration>(std::chrono::milliseconds(50), (deadline - now) / 5);
  }
  deadline = std::min(deadline, now + max_sequence_wait_);
  if (gate_ == nullptr) {
    const uint64_t at = predictor->store().Snapshot()->sequence();
    if (at >= min_graph_sequence) return run();
    return call->Reply(absl::UnavailableError(
        absl::StrCat("the graph is at sequence ", at, ", ", min_graph_sequence - at,
                     " behind the requested min_graph_sequence ", min_graph_sequence)));
  }
  gate_->WhenReached(min_graph_sequence, deadline,
                     [call, run = std::move(run)](absl::Status reached) {
                       if (!reached.ok()) return call->Reply(reached);
                       run();
                     });
}

grpc::ServerUnaryReactor* KnowledgeGraphService::CreateCheckpoint(
    grpc::CallbackServerContext* context, const kg::v1::CreateCheckpointRequest* request,
    kg::v1::CreateCheckpointResponse* response) {
  auto* call = new UnaryCall(this, "CreateCheckpoint", context);
  LinkPredictor* predictor;
  grpc::Status status = Admit(call, Scope::kAdmin, &predictor);
  if (status.ok()) status = ToGrpcStatus(ValidateName(request->dir(), "dir", 4096));
  if (status.ok() && request->dir()[0] != '/') {
    status = InvalidArgument(absl::StrCat("dir \"", absl::CHexEscape(request->dir()),
                                          "\" is relative; send an absolute path"));
  }
  if (!status.ok()) {
    call->Reply(status);
    return call;
  }
  // Copying or linking the store's files takes a while: not on a gRPC thread.
  reloads_->Post([call, predictor, dir = request->dir(), response] {
    absl::StatusOr<uint64_t> sequence = predictor->store().CreateCheckpoint(dir);
    if (!sequence.ok()) return call->Reply(sequence.status());
    response->set_dir(dir);
    response->set_graph_sequence(*sequence);
    call->Reply(grpc::Status::OK);
  });
  return call;
}

grpc::ServerWriteReactor<kg::v1::ExportTriplesResponse>* KnowledgeGraphService::ExportTriples(
    grpc::CallbackServerContext* context, const kg::v1::ExportTriplesRequest* request) {
  return new ExportCall(this, context, *request);
}

}  // namespace grail
