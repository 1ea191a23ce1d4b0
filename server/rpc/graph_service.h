// The kg.v1.KnowledgeGraph gRPC service: thin handlers that validate a request, hand it to
// the LinkPredictor and translate the answer (or the error) back. See
// proto/kg/v1/knowledge_graph.proto for the API's contract.
//
// Handlers use gRPC's callback API: a call waiting for its scores holds no thread (the
// engine finishes it from its own threads), and AddTriples / RemoveTriples chunks are
// applied by one writer thread, so a slow disk never blocks gRPC's threads either.
//
// The service exists before the model and the graph are loaded (so that health checks get
// answers during a long start): until Activate() every call returns UNAVAILABLE. Calls in
// flight are bounded (ServiceLimits::max_calls_in_flight): beyond, a call fails at once
// with RESOURCE_EXHAUSTED. After BeginDrain() open chunk streams end with UNAVAILABLE
// between chunks; other calls finish (gRPC itself refuses new ones once the server shuts
// down).
//
// Thread safety: gRPC calls the handlers from many threads; Activate and BeginDrain may be
// called from any thread. The service must outlive the grpc::Server it is registered with.
#ifndef GRAIL_SERVER_RPC_GRAPH_SERVICE_H_
#define GRAIL_SERVER_RPC_GRAPH_SERVICE_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "kg/v1/knowledge_graph.grpc.pb.h"
#include "server/metrics/service_observer.h"
#include "server/replication/replication.h"
#include "server/replication/sequence_gate.h"
#include "server/rpc/access_tokens.h"
#include "server/scoring/link_predictor.h"
#include "server/scoring/model_reloader.h"
#include "server/scoring/online_evaluation.h"

namespace grail {

struct ServiceLimits {
  uint32_t max_request_triples = 10000;  // ScoreTriplets
  uint32_t max_candidates = 100000;      // explicit RankTails/RankHeads candidate lists
  uint32_t max_chunk_facts = 100000;     // AddTriples (the store enforces it too)
  uint32_t max_calls_in_flight = 1000;   // KnowledgeGraph calls and streams at once
  uint32_t max_name_bytes = 1024;        // every entity and relation name a call sends
  // The fraction of max_calls_in_flight one caller (a token's name, or one connection when
  // tokens are off) may hold (1: no per-caller limit).
  double max_caller_share = 0.5;
};

// The API's value for `scored_by`: SCORED_BY_ and its ScorerName upper-cased
// (SCORED_BY_UNSPECIFIED where the API has none).
kg::v1::ScoredBy ScoredByToProto(ScoredBy scored_by);

// Static facts about the server, for GetStats (the model's come from the predictor).
struct ServedModelInfo {
  std::string version;  // the server's build version
};

// The generated CallbackService, except that AddTriples and RemoveTriples take raw bytes: the
// service parses each chunk itself, so that one that does not parse (a name that is not
// valid UTF-8) is rejected naming its line rather than silently ending the stream
// (server/wire/chunk_parsing.h). A method added to the proto must be added here too.
using KnowledgeGraphBase = kg::v1::KnowledgeGraph::WithCallbackMethod_ScoreTriplet<
    kg::v1::KnowledgeGraph::WithCallbackMethod_ScoreTriplets<
        kg::v1::KnowledgeGraph::WithCallbackMethod_RankTails<
            kg::v1::KnowledgeGraph::WithCallbackMethod_RankHeads<
                kg::v1::KnowledgeGraph::WithRawCallbackMethod_AddTriples<
                    kg::v1::KnowledgeGraph::WithRawCallbackMethod_RemoveTriples<
                        kg::v1::KnowledgeGraph::WithCallbackMethod_GetStats<
                            kg::v1::KnowledgeGraph::WithCallbackMethod_ReloadModel<
                                kg::v1::KnowledgeGraph::WithCallbackMethod_CreateCheckpoint<
                                    kg::v1::KnowledgeGraph::WithCallbackMethod_ExportTriples<
                                        kg::v1::KnowledgeGraph::Service>>>>>>>>>>;

class KnowledgeGraphService final : public KnowledgeGraphBase, public ServiceLoad {
 public:
  // `observer` may be null. With `tokens` (which must outlive the service) every
  // KnowledgeGraph call needs a bearer token: read for scoring, ranking and GetStats, write
  // for AddTriples, RemoveTriples and ExportTriples, admin for ReloadModel and
  // CreateCheckpoint; without, calls are not authenticated.
  KnowledgeGraphService(const ServiceLimits& limits, ServiceObserver* observer,
                        const AccessTokens* tokens = nullptr);
  // Stops the chunk writer and the reload thread (after the grpc::Server has shut down,
  // which waits for every call, reloads included, to finish).
  ~KnowledgeGraphService() override;

  // Starts answering with `predictor` and, for ReloadModel, `reloader` (null: ReloadModel
  // is UNIMPLEMENTED); both must outlive the service's calls.
  void Activate(LinkPredictor* predictor, ModelReloader* reloader, const ServedModelInfo& info,
                uint32_t max_batch_size);
  // Reloads the model from --model on the reload thread (SIGHUP), queued like ReloadModel
  // calls; the outcome is logged and counted by the reloader.
  void ReloadFromSignal();
  // Read-your-writes: calls with min_graph_sequence wait on `gate` (fed by the store's
  // commits) for at most `max_wait`. Without a gate, a call asking for a version the graph
  // has not reached fails at once. Before Activate; `gate` must outlive the service's calls.
  void UseSequenceGate(SequenceGate* gate, std::chrono::milliseconds max_wait) {
    gate_ = gate;
    max_sequence_wait_ = max_wait;
  }
  // Replicated writes: AddTriples and RemoveTriples chunks are validated, then logged through
  // `replicator` (which applies them to the store like every replica's), instead of being
  // written to the store directly. Before Activate.
  void UseReplicator(Replicator* replicator) { replicator_ = replicator; }
  // The served model's accuracy on the facts AddTriples brings (online_evaluation.h): each
  // chunk is offered to `evaluator` before it is applied. Before Activate; `evaluator` must
  // outlive the service's calls.
  void UseOnlineEvaluation(OnlineEvaluator* evaluator) { online_ = evaluator; }

  // Graceful shutdown has begun: open AddTriples streams end after their current chunk
  // (UNAVAILABLE, saying what is stored), exports before their next page; unary calls still being
  // delivered are served, as grpc::Server::Shutdown lets them finish.
  void BeginDrain() { draining_.store(true); }
  bool ready() const { return predictor_.load(std::memory_order_acquire) != nullptr; }
  // KnowledgeGraph calls and AddTriples streams in progress.
  int64_t calls_in_flight() const override { return in_flight_.load(std::memory_order_relaxed); }

  grpc::ServerUnaryReactor* ScoreTriplet(grpc::CallbackServerContext* context,
                                         const kg::v1::ScoreTripletRequest* request,
                                         kg::v1::ScoreTripletResponse* response) override;
  grpc::ServerUnaryReactor* ScoreTriplets(grpc::CallbackServerContext* context,
                                          const kg::v1::ScoreTripletsRequest* request,
                                          kg::v1::ScoreTripletsResponse* response) override;
  grpc::ServerUnaryReactor* RankTails(grpc::CallbackServerContext* context,
                                      const kg::v1::RankTailsRequest* request,
                                      kg::v1::RankResponse* response) override;
  grpc::ServerUnaryReactor* RankHeads(grpc::CallbackServerContext* context,
                                      const kg::v1::RankHeadsRequest* request,
                                      kg::v1::RankResponse* response) override;
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* AddTriples(
      grpc::CallbackServerContext* context) override;
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* RemoveTriples(
      grpc::CallbackServerContext* context) override;
  grpc::ServerUnaryReactor* GetStats(grpc::CallbackServerContext* context,
                                     const kg::v1::GetStatsRequest* request,
                                     kg::v1::GetStatsResponse* response) override;
  grpc::ServerUnaryReactor* ReloadModel(grpc::CallbackServerContext* context,
                                        const kg::v1::ReloadModelRequest* request,
                                        kg::v1::ReloadModelResponse* response) override;
  grpc::ServerUnaryReactor* CreateCheckpoint(grpc::CallbackServerContext* context,
                                             const kg::v1::CreateCheckpointRequest* request,
                                             kg::v1::CreateCheckpointResponse* response) override;
  grpc::ServerWriteReactor<kg::v1::ExportTriplesResponse>* ExportTriples(
      grpc::CallbackServerContext* context, const kg::v1::ExportTriplesRequest* request) override;

 private:
  class UnaryCall;
  template <typename Request>
  class ChunkStreamCall;
  class ExportCall;
  class TaskThread;

  // The predictor; or UNAUTHENTICATED / PERMISSION_DENIED when the call's token is missing,
  // unknown or lacks `needed`; or UNAVAILABLE while loading; or RESOURCE_EXHAUSTED beyond
  // the calls in flight (the call has counted itself in already) or beyond its caller's
  // share of them. On OK `*caller` names the caller ("token NAME", or "peer ADDRESS" for
  // one connection when tokens are off), now counted until the call answers (LeaveCaller).
  grpc::Status Admit(grpc::CallbackServerContext* context, absl::string_view method, Scope needed,
                     LinkPredictor** predictor, std::string* caller);
  // The same for a unary call, which then carries its caller (UnaryCall::Admitted).
  grpc::Status Admit(UnaryCall* call, Scope needed, LinkPredictor** predictor);
  // A call of `*caller` has answered: its slot is freed and `*caller` cleared, so that a
  // call's later calls here (from its OnDone) do nothing. "" (never admitted): nothing.
  void LeaveCaller(std::string* caller);
  // Validates a ranking request and starts it; `call` is finished either way.
  void Rank(UnaryCall* call, RankQuery query, const kg::v1::RankOptions& options,
            uint64_t min_graph_sequence, kg::v1::RankResponse* response);
  // Runs `run` once the graph is at `min_graph_sequence` (at once for 0), or finishes `call`
  // with UNAVAILABLE if it does not get there within the call's deadline and
  // max_sequence_wait_.
  void AfterSequence(UnaryCall* call, LinkPredictor* predictor, uint64_t min_graph_sequence,
                     std::function<void()> run);

  const ServiceLimits limits_;
  ServiceObserver default_observer_;
  ServiceObserver* const observer_;
  const AccessTokens* const tokens_;
  std::atomic<LinkPredictor*> predictor_{nullptr};
  std::atomic<bool> draining_{false};
  std::atomic<int64_t> in_flight_{0};
  absl::Mutex callers_mu_;
  // Calls in flight per caller, for max_caller_share; callers with none are removed.
  absl::flat_hash_map<std::string, int64_t> calls_by_caller_ ABSL_GUARDED_BY(callers_mu_);
  // Calls admitted and not done (max_calls_in_flight); in_flight_ also counts calls being
  // refused.
  int64_t admitted_calls_ ABSL_GUARDED_BY(callers_mu_) = 0;
  ServedModelInfo info_;
  uint32_t max_batch_size_ = 0;
  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  ModelReloader* reloader_ = nullptr;
  SequenceGate* gate_ = nullptr;
  std::chrono::milliseconds max_sequence_wait_{10000};
  Replicator* replicator_ = nullptr;
  OnlineEvaluator* online_ = nullptr;
  std::unique_ptr<TaskThread> writer_;
  std::unique_ptr<TaskThread> reloads_;
  // Reads the pages of ExportTriples streams, one page at a time, taking the streams in
  // turn.
  std::unique_ptr<TaskThread> exports_;
};

}  // namespace grail

#endif  // GRAIL_SERVER_RPC_GRAPH_SERVICE_H_
