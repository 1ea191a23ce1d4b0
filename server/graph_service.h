// The kg.v1.KnowledgeGraph gRPC service: thin handlers that validate a request, hand it to
// the LinkPredictor and translate the answer (or the error) back. See
// proto/kg/v1/knowledge_graph.proto for the API's contract.
//
// The service exists before the model and the graph are loaded (so that health checks get
// answers during a long start): until Activate() every call returns UNAVAILABLE. After
// BeginDrain() open AddTriples streams end with UNAVAILABLE between chunks; other calls
// finish (gRPC itself refuses new ones once the server shuts down).
//
// Thread safety: gRPC calls the handlers from many threads; Activate and BeginDrain may be
// called from any thread.
#ifndef GRAIL_SERVER_GRAPH_SERVICE_H_
#define GRAIL_SERVER_GRAPH_SERVICE_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "kg/v1/knowledge_graph.grpc.pb.h"
#include "server/link_predictor.h"

namespace grail {

struct ServiceLimits {
  uint32_t max_request_triples = 10000;  // ScoreTriplets
  uint32_t max_candidates = 100000;      // explicit RankTails/RankHeads candidate lists
  uint32_t max_chunk_facts = 100000;     // AddTriples (the store enforces it too)
};

// What the service reports to metrics; called on gRPC threads, must be thread-safe.
class ServiceObserver {
 public:
  virtual ~ServiceObserver() = default;
  // A finished call (for AddTriples: the stream) with its status code and duration.
  virtual void OnCall(absl::string_view method, int grpc_code, double seconds) {}
  // An acknowledged AddTriples chunk of `facts` facts and how long storing it took.
  virtual void OnChunkStored(const ChunkResult& result, size_t facts, double seconds) {}
};

// Static facts about the served model, for GetStats.
struct ServedModelInfo {
  std::string path;
  std::string version;  // the server's build version
};

class KnowledgeGraphService final : public kg::v1::KnowledgeGraph::Service {
 public:
  // `observer` may be null.
  KnowledgeGraphService(const ServiceLimits& limits, ServiceObserver* observer);

  // Starts answering with `predictor` (which must outlive the service).
  void Activate(LinkPredictor* predictor, const ServedModelInfo& info, uint32_t max_batch_size);
  // Graceful shutdown has begun: open AddTriples streams end after their current chunk
  // (UNAVAILABLE, saying what is stored); unary calls still being delivered are served, as
  // grpc::Server::Shutdown lets them finish.
  void BeginDrain() { draining_.store(true); }
  bool ready() const { return predictor_.load(std::memory_order_acquire) != nullptr; }

  grpc::Status ScoreTriplet(grpc::ServerContext* context,
                            const kg::v1::ScoreTripletRequest* request,
                            kg::v1::ScoreTripletResponse* response) override;
  grpc::Status ScoreTriplets(grpc::ServerContext* context,
                             const kg::v1::ScoreTripletsRequest* request,
                             kg::v1::ScoreTripletsResponse* response) override;
  grpc::Status RankTails(grpc::ServerContext* context, const kg::v1::RankTailsRequest* request,
                         kg::v1::RankResponse* response) override;
  grpc::Status RankHeads(grpc::ServerContext* context, const kg::v1::RankHeadsRequest* request,
                         kg::v1::RankResponse* response) override;
  grpc::Status AddTriples(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<kg::v1::AddTriplesAck, kg::v1::AddTriplesRequest>* stream) override;
  grpc::Status GetStats(grpc::ServerContext* context, const kg::v1::GetStatsRequest* request,
                        kg::v1::GetStatsResponse* response) override;

 private:
  // The predictor, or UNAVAILABLE while loading.
  grpc::Status Available(LinkPredictor** predictor) const;
  grpc::Status Rank(grpc::ServerContext* context, RankQuery query,
                    const kg::v1::RankOptions& options, kg::v1::RankResponse* response);
  grpc::Status AddTriplesStream(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<kg::v1::AddTriplesAck, kg::v1::AddTriplesRequest>* stream);
  // Reports the call to the observer and returns `status`.
  grpc::Status Finish(absl::string_view method, std::chrono::steady_clock::time_point start,
                      grpc::Status status);

  const ServiceLimits limits_;
  ServiceObserver default_observer_;
  ServiceObserver* const observer_;
  std::atomic<LinkPredictor*> predictor_{nullptr};
  std::atomic<bool> draining_{false};
  ServedModelInfo info_;
  uint32_t max_batch_size_ = 0;
  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
};

}  // namespace grail

#endif  // GRAIL_SERVER_GRAPH_SERVICE_H_
