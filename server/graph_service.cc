#include "server/graph_service.h"

#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace grail {
namespace {

using Clock = std::chrono::steady_clock;

// absl and gRPC share the canonical status codes.
grpc::Status ToGrpc(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

grpc::Status InvalidArgument(std::string message) {
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, std::move(message));
}

// The call's deadline and the client's cancellation, as the domain layer sees them.
Cancellation FromContext(grpc::ServerContext* context) {
  Cancellation c;
  c.cancelled = [context] {
    return context->IsCancelled() || std::chrono::system_clock::now() > context->deadline();
  };
  c.status = [context] {
    if (std::chrono::system_clock::now() > context->deadline()) {
      return absl::DeadlineExceededError("the call's deadline passed before scoring finished");
    }
    return absl::CancelledError("the client cancelled the call");
  };
  return c;
}

// Checks that a triple names all three parts; `where` prefixes the message.
grpc::Status ValidateTriple(const kg::v1::Triple& t, absl::string_view where) {
  if (t.head().empty()) return InvalidArgument(absl::StrCat(where, ".head is empty"));
  if (t.relation().empty()) return InvalidArgument(absl::StrCat(where, ".relation is empty"));
  if (t.tail().empty()) return InvalidArgument(absl::StrCat(where, ".tail is empty"));
  return grpc::Status::OK;
}

NamedTriple ToNamed(const kg::v1::Triple& t) {
  return NamedTriple{t.head(), t.relation(), t.tail()};
}

void FillScore(const FactScore& s, uint64_t sequence, kg::v1::ScoreTripletResponse* out) {
  out->set_score(s.score);
  out->set_probability(static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(s.score)))));
  out->set_known_fact(s.known_fact);
  out->set_subgraph_nodes(static_cast<uint32_t>(s.subgraph_nodes));
  out->set_subgraph_edges(static_cast<uint32_t>(s.subgraph_edges));
  out->set_graph_sequence(sequence);
}

}  // namespace

KnowledgeGraphService::KnowledgeGraphService(const ServiceLimits& limits, ServiceObserver* observer)
    : limits_(limits), observer_(observer != nullptr ? observer : &default_observer_) {}

void KnowledgeGraphService::Activate(LinkPredictor* predictor, const ServedModelInfo& info,
                                     uint32_t max_batch_size) {
  info_ = info;
  max_batch_size_ = max_batch_size;
  predictor_.store(predictor, std::memory_order_release);
}

grpc::Status KnowledgeGraphService::Available(LinkPredictor** predictor) const {
  *predictor = predictor_.load(std::memory_order_acquire);
  if (*predictor == nullptr) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        "the server is still loading its model and graph");
  }
  return grpc::Status::OK;
}

grpc::Status KnowledgeGraphService::Finish(absl::string_view method, Clock::time_point start,
                                           grpc::Status status) {
  observer_->OnCall(method, static_cast<int>(status.error_code()),
                    std::chrono::duration<double>(Clock::now() - start).count());
  return status;
}

grpc::Status KnowledgeGraphService::ScoreTriplet(grpc::ServerContext* context,
                                                 const kg::v1::ScoreTripletRequest* request,
                                                 kg::v1::ScoreTripletResponse* response) {
  const Clock::time_point start = Clock::now();
  LinkPredictor* predictor;
  grpc::Status status = Available(&predictor);
  if (status.ok()) status = ValidateTriple(request->triple(), "triple");
  if (!status.ok()) return Finish("ScoreTriplet", start, status);
  const NamedTriple fact = ToNamed(request->triple());
  absl::StatusOr<ScoredFacts> scored =
      predictor->Score(absl::MakeConstSpan(&fact, 1), FromContext(context));
  if (!scored.ok()) return Finish("ScoreTriplet", start, ToGrpc(scored.status()));
  FillScore(scored->scores[0], scored->graph_sequence, response);
  return Finish("ScoreTriplet", start, grpc::Status::OK);
}

grpc::Status KnowledgeGraphService::ScoreTriplets(grpc::ServerContext* context,
                                                  const kg::v1::ScoreTripletsRequest* request,
                                                  kg::v1::ScoreTripletsResponse* response) {
  const Clock::time_point start = Clock::now();
  LinkPredictor* predictor;
  grpc::Status status = Available(&predictor);
  if (status.ok() && static_cast<uint32_t>(request->triples_size()) > limits_.max_request_triples) {
    status =
        grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                     absl::StrCat(request->triples_size(), " triples in one call; the limit is ",
                                  limits_.max_request_triples));
  }
  std::vector<NamedTriple> facts;
  facts.reserve(request->triples_size());
  for (int i = 0; status.ok() && i < request->triples_size(); ++i) {
    status = ValidateTriple(request->triples(i), absl::StrCat("triples[", i, "]"));
    facts.push_back(ToNamed(request->triples(i)));
  }
  if (!status.ok()) return Finish("ScoreTriplets", start, status);
  absl::StatusOr<ScoredFacts> scored = predictor->Score(facts, FromContext(context));
  if (!scored.ok()) return Finish("ScoreTriplets", start, ToGrpc(scored.status()));
  for (const FactScore& s : scored->scores)
    FillScore(s, scored->graph_sequence, response->add_results());
  response->set_graph_sequence(scored->graph_sequence);
  return Finish("ScoreTriplets", start, grpc::Status::OK);
}

grpc::Status KnowledgeGraphService::Rank(grpc::ServerContext* context, RankQuery query,
                                         const kg::v1::RankOptions& options,
                                         kg::v1::RankResponse* response) {
  LinkPredictor* predictor;
  grpc::Status status = Available(&predictor);
  if (!status.ok()) return status;
  if (query.fixed.empty()) {
    return InvalidArgument(query.rank_tails ? "head is empty" : "tail is empty");
  }
  if (query.relation.empty()) return InvalidArgument("relation is empty");
  if (static_cast<uint32_t>(options.candidates_size()) > limits_.max_candidates) {
    return grpc::Status(
        grpc::StatusCode::RESOURCE_EXHAUSTED,
        absl::StrCat(options.candidates_size(), " candidates in one call; the limit is ",
                     limits_.max_candidates, " (send none to rank every entity)"));
  }
  for (int i = 0; i < options.candidates_size(); ++i) {
    if (options.candidates(i).empty()) {
      return InvalidArgument(absl::StrCat("options.candidates[", i, "] is empty"));
    }
  }
  query.candidates.assign(options.candidates().begin(), options.candidates().end());
  query.top_k = options.top_k();
  query.filter_known_facts = options.filter_known_facts();
  absl::StatusOr<Ranking> ranking = predictor->Rank(query, FromContext(context));
  if (!ranking.ok()) return ToGrpc(ranking.status());
  for (const RankedEntity& r : ranking->ranked) {
    kg::v1::RankedEntity* out = response->add_ranked();
    out->set_entity(r.entity);
    out->set_score(r.score);
    out->set_rank(r.rank);
    out->set_known_fact(r.known_fact);
  }
  response->set_candidates_scored(ranking->candidates_scored);
  response->set_candidates_filtered(ranking->candidates_filtered);
  response->set_graph_sequence(ranking->graph_sequence);
  return grpc::Status::OK;
}

grpc::Status KnowledgeGraphService::RankTails(grpc::ServerContext* context,
                                              const kg::v1::RankTailsRequest* request,
                                              kg::v1::RankResponse* response) {
  const Clock::time_point start = Clock::now();
  RankQuery query;
  query.rank_tails = true;
  query.fixed = request->head();
  query.relation = request->relation();
  return Finish("RankTails", start, Rank(context, std::move(query), request->options(), response));
}

grpc::Status KnowledgeGraphService::RankHeads(grpc::ServerContext* context,
                                              const kg::v1::RankHeadsRequest* request,
                                              kg::v1::RankResponse* response) {
  const Clock::time_point start = Clock::now();
  RankQuery query;
  query.rank_tails = false;
  query.fixed = request->tail();
  query.relation = request->relation();
  return Finish("RankHeads", start, Rank(context, std::move(query), request->options(), response));
}

grpc::Status KnowledgeGraphService::AddTriples(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<kg::v1::AddTriplesAck, kg::v1::AddTriplesRequest>* stream) {
  const Clock::time_point start = Clock::now();
  return Finish("AddTriples", start, AddTriplesStream(context, stream));
}

grpc::Status KnowledgeGraphService::AddTriplesStream(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<kg::v1::AddTriplesAck, kg::v1::AddTriplesRequest>* stream) {
  LinkPredictor* predictor;
  grpc::Status status = Available(&predictor);
  if (!status.ok()) return status;
  kg::v1::AddTriplesRequest chunk;
  std::vector<NamedTriple> facts;
  for (uint64_t index = 0; stream->Read(&chunk); ++index) {
    if (draining_.load()) {
      return grpc::Status(
          grpc::StatusCode::UNAVAILABLE,
          absl::StrCat("the server is shutting down; chunk ", index, " was not stored, the ", index,
                       " chunks acknowledged before it are"));
    }
    const uint64_t first_line = chunk.first_line() > 0 ? chunk.first_line() : 1;
    if (static_cast<uint32_t>(chunk.triples_size()) > limits_.max_chunk_facts) {
      return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                          absl::StrCat("chunk ", index, " (lines ", first_line, "-",
                                       first_line + chunk.triples_size() - 1, ") has ",
                                       chunk.triples_size(), " facts; the limit is ",
                                       limits_.max_chunk_facts, "; nothing of it was stored"));
    }
    kg::v1::AddTriplesAck ack;
    ack.set_chunk_index(index);
    if (chunk.triples_size() == 0) {
      // Nothing to store; acknowledge so that the client's count of acks stays in step.
      ack.set_sequence(predictor->store().Snapshot()->sequence());
      stream->Write(ack);
      continue;
    }
    facts.clear();
    for (const kg::v1::Triple& t : chunk.triples()) facts.push_back(ToNamed(t));
    const Clock::time_point chunk_start = Clock::now();
    absl::StatusOr<ChunkResult> result = predictor->Add(facts);
    if (!result.ok()) {
      const std::optional<size_t> position = RejectedFactIndex(result.status());
      if (!position) return ToGrpc(result.status());
      // The store says "fact N: reason"; the client knows lines, not positions.
      absl::string_view reason = result.status().message();
      absl::ConsumePrefix(&reason, absl::StrCat("fact ", *position, ": "));
      return grpc::Status(
          static_cast<grpc::StatusCode>(result.status().code()),
          absl::StrCat("line ", first_line + *position, ": ", reason, " (chunk ", index, ", fact ",
                       *position, "); nothing of this chunk was stored, the ", index,
                       " chunks acknowledged before it are"));
    }
    observer_->OnChunkStored(*result, facts.size(),
                             std::chrono::duration<double>(Clock::now() - chunk_start).count());
    ack.set_sequence(result->sequence);
    ack.set_facts_added(result->facts_added);
    ack.set_duplicate_facts(result->duplicate_facts);
    ack.set_entities_created(result->entities_created);
    ack.set_relations_created(result->relations_created);
    if (!stream->Write(ack)) {
      // The client is gone; the chunk is stored all the same (it resends unacked chunks).
      return grpc::Status(grpc::StatusCode::CANCELLED, "the client went away");
    }
  }
  if (context->IsCancelled()) {
    return grpc::Status(grpc::StatusCode::CANCELLED, "the client cancelled the stream");
  }
  return grpc::Status::OK;
}

grpc::Status KnowledgeGraphService::GetStats(grpc::ServerContext* context,
                                             const kg::v1::GetStatsRequest* request,
                                             kg::v1::GetStatsResponse* response) {
  const Clock::time_point start = Clock::now();
  LinkPredictor* predictor;
  grpc::Status status = Available(&predictor);
  if (!status.ok()) return Finish("GetStats", start, status);
  const std::shared_ptr<const GraphSnapshot> graph = predictor->store().Snapshot();
  response->set_entities(graph->num_entities());
  response->set_relations(graph->num_relations());
  response->set_facts(graph->num_facts());
  response->set_graph_sequence(graph->sequence());
  const GrailModel& model = predictor->model();
  kg::v1::ModelInfo* info = response->mutable_model();
  info->set_path(info_.path);
  info->set_format(kModelFormat);
  for (const std::string& r : model.relations()) info->add_relations(r);
  info->set_hops(model.config().hops);
  info->set_layers(model.config().num_layers);
  info->set_dim(model.config().dim);
  info->set_parameters(model.num_parameters());
  info->set_training_fingerprint(model.training_fingerprint());
  info->set_device(model.device());
  response->set_max_batch_size(max_batch_size_);
  response->set_max_chunk_facts(limits_.max_chunk_facts);
  response->set_max_request_triples(limits_.max_request_triples);
  response->set_uptime_seconds(std::chrono::duration<double>(Clock::now() - started_).count());
  response->set_version(info_.version);
  return Finish("GetStats", start, grpc::Status::OK);
}

}  // namespace grail
