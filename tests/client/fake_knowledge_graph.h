// An in-process KnowledgeGraph server with a fake model, for testing the client without the
// real server: scores are a fixed function of the names (FakeScore), the graph is a set of
// facts by name, and AddTriples can be told to hold its acknowledgements back.
#ifndef GRAIL_TESTS_CLIENT_FAKE_KNOWLEDGE_GRAPH_H_
#define GRAIL_TESTS_CLIENT_FAKE_KNOWLEDGE_GRAPH_H_

#include <algorithm>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "kg/v1/knowledge_graph.grpc.pb.h"

namespace grail {

// The fake model: a score in [-5, 5) that differs between most triples.
inline float FakeScore(const std::string& head, const std::string& relation,
                       const std::string& tail) {
  uint32_t h = 2166136261u;  // FNV-1a
  for (const std::string* s : {&head, &relation, &tail}) {
    for (unsigned char c : *s) h = (h ^ c) * 16777619u;
    h = (h ^ 0xff) * 16777619u;
  }
  return static_cast<float>(h % 1000) / 100.0f - 5.0f;
}

class FakeKnowledgeGraph final : public kg::v1::KnowledgeGraph::Service {
 public:
  // Entity "missing" is never found; relation "unknown" is outside the vocabulary; a chunk
  // holding relation "bad" is rejected naming the line.
  FakeKnowledgeGraph() {
    for (const char* e : {"a", "b", "c", "d", "e"}) entities_.insert(e);
    facts_.insert({"a", "likes", "b"});
  }

  // AddTriples acknowledges nothing until this many chunks are unacknowledged (or the
  // client has finished sending), then acknowledges them all.
  void set_ack_after_chunks(int n) { ack_after_chunks_ = n; }

  struct ReceivedChunk {
    uint64_t first_line;
    int facts;
  };
  std::vector<ReceivedChunk> received_chunks() const {
    std::lock_guard<std::mutex> lock(mu_);
    return received_;
  }
  int max_unacknowledged() const {
    std::lock_guard<std::mutex> lock(mu_);
    return max_unacknowledged_;
  }

  // The connections (peer addresses) ScoreTriplet calls came on.
  std::set<std::string> score_peers() const {
    std::lock_guard<std::mutex> lock(mu_);
    return score_peers_;
  }

  grpc::Status ScoreTriplet(grpc::ServerContext* context,
                            const kg::v1::ScoreTripletRequest* request,
                            kg::v1::ScoreTripletResponse* response) override {
    std::lock_guard<std::mutex> lock(mu_);
    score_peers_.insert(context->peer());
    return Score(request->triple(), response);
  }

  grpc::Status ScoreTriplets(grpc::ServerContext*, const kg::v1::ScoreTripletsRequest* request,
                             kg::v1::ScoreTripletsResponse* response) override {
    std::lock_guard<std::mutex> lock(mu_);
    for (const kg::v1::Triple& t : request->triples()) {
      grpc::Status status = Score(t, response->add_results());
      if (!status.ok()) return status;
    }
    response->set_graph_sequence(sequence_);
    return grpc::Status::OK;
  }

  grpc::Status RankTails(grpc::ServerContext*, const kg::v1::RankTailsRequest* request,
                         kg::v1::RankResponse* response) override {
    return Rank(request->head(), request->relation(), "", request->options(), response);
  }

  grpc::Status RankHeads(grpc::ServerContext*, const kg::v1::RankHeadsRequest* request,
                         kg::v1::RankResponse* response) override {
    return Rank("", request->relation(), request->tail(), request->options(), response);
  }

  grpc::Status AddTriples(
      grpc::ServerContext*,
      grpc::ServerReaderWriter<kg::v1::AddTriplesAck, kg::v1::AddTriplesRequest>* stream) override {
    kg::v1::AddTriplesRequest chunk;
    std::vector<kg::v1::AddTriplesAck> pending;
    uint64_t index = 0;
    auto flush = [&] {
      for (const kg::v1::AddTriplesAck& ack : pending) stream->Write(ack);
      pending.clear();
    };
    while (stream->Read(&chunk)) {
      kg::v1::AddTriplesAck ack;
      {
        std::lock_guard<std::mutex> lock(mu_);
        received_.push_back({chunk.first_line(), chunk.triples_size()});
      }
      for (int i = 0; i < chunk.triples_size(); ++i) {
        if (chunk.triples(i).relation() == "bad") {
          flush();  // the chunks before this one are stored
          return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                              absl::StrCat("line ", chunk.first_line() + i,
                                           ": relation bad is not in the model's vocabulary"));
        }
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        for (const kg::v1::Triple& t : chunk.triples()) {
          for (const std::string* e : {&t.head(), &t.tail()}) {
            if (entities_.insert(*e).second) ack.set_entities_created(ack.entities_created() + 1);
          }
          if (facts_.insert({t.head(), t.relation(), t.tail()}).second) {
            ack.set_facts_added(ack.facts_added() + 1);
          } else {
            ack.set_duplicate_facts(ack.duplicate_facts() + 1);
          }
        }
        ack.set_sequence(++sequence_);
        ack.set_chunk_index(index++);
        pending.push_back(ack);
        max_unacknowledged_ = std::max(max_unacknowledged_, static_cast<int>(pending.size()));
      }
      if (static_cast<int>(pending.size()) >= ack_after_chunks_) flush();
    }
    flush();
    return grpc::Status::OK;
  }

  grpc::Status GetStats(grpc::ServerContext*, const kg::v1::GetStatsRequest*,
                        kg::v1::GetStatsResponse* response) override {
    std::lock_guard<std::mutex> lock(mu_);
    response->set_entities(entities_.size());
    response->set_relations(2);
    response->set_facts(facts_.size());
    response->set_graph_sequence(sequence_);
    response->mutable_model()->set_format("grail-kg-model/1");
    response->mutable_model()->add_relations("likes");
    response->mutable_model()->add_relations("hates");
    response->mutable_model()->set_parameters(12345678901ULL);
    response->mutable_model()->set_version("model.pt@0123456789abcdef");
    response->mutable_model()->set_generation(7);
    response->mutable_model()->set_loaded_at_unix_seconds(1765000000.5);
    kg::v1::KgeModelInfo* kge = response->mutable_model()->add_kge_models();
    kge->set_kind("rotate");
    kge->set_dim(32);
    response->set_version("fake \"1\"");
    return grpc::Status::OK;
  }

 private:
  grpc::Status Score(const kg::v1::Triple& t, kg::v1::ScoreTripletResponse* response) {
    for (const std::string* e : {&t.head(), &t.tail()}) {
      if (entities_.count(*e) == 0) {
        return grpc::Status(grpc::StatusCode::NOT_FOUND, "entity " + *e + " is not in the graph");
      }
    }
    if (t.relation() == "unknown") {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "relation unknown is not known");
    }
    response->set_score(FakeScore(t.head(), t.relation(), t.tail()));
    response->set_probability(0.5f);
    response->set_known_fact(facts_.count({t.head(), t.relation(), t.tail()}) > 0);
    response->set_subgraph_nodes(2);
    response->set_subgraph_edges(1);
    response->set_graph_sequence(sequence_);
    response->set_scored_by(kg::v1::SCORED_BY_FUSED);
    return grpc::Status::OK;
  }

  // One of head and tail is empty: the side being ranked.
  grpc::Status Rank(const std::string& head, const std::string& relation, const std::string& tail,
                    const kg::v1::RankOptions& options, kg::v1::RankResponse* response) {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string> candidates(options.candidates().begin(), options.candidates().end());
    if (candidates.empty()) candidates.assign(entities_.begin(), entities_.end());
    std::vector<kg::v1::RankedEntity> ranked;
    for (const std::string& c : candidates) {
      kg::v1::ScoreTripletResponse score;
      kg::v1::Triple t;
      t.set_head(head.empty() ? c : head);
      t.set_relation(relation);
      t.set_tail(tail.empty() ? c : tail);
      grpc::Status status = Score(t, &score);
      if (!status.ok()) return status;
      if (options.filter_known_facts() && score.known_fact()) {
        response->set_candidates_filtered(response->candidates_filtered() + 1);
        continue;
      }
      kg::v1::RankedEntity entity;
      entity.set_entity(c);
      entity.set_score(score.score());
      entity.set_known_fact(score.known_fact());
      entity.set_scored_by(score.scored_by());
      ranked.push_back(entity);
    }
    std::sort(ranked.begin(), ranked.end(), [](const auto& x, const auto& y) {
      return x.score() > y.score() || (x.score() == y.score() && x.entity() < y.entity());
    });
    response->set_candidates_scored(ranked.size());
    // The client prints what the server says; any recognisable number does.
    response->set_candidates_shared_score(options.candidates().empty() ? 3 : 0);
    for (size_t i = 0; i < ranked.size(); ++i) {
      if (options.top_k() > 0 && i >= options.top_k()) break;
      ranked[i].set_rank(i + 1);
      *response->add_ranked() = ranked[i];
    }
    response->set_graph_sequence(sequence_);
    return grpc::Status::OK;
  }

  mutable std::mutex mu_;
  std::set<std::string> entities_;
  std::set<std::tuple<std::string, std::string, std::string>> facts_;
  uint64_t sequence_ = 0;
  int ack_after_chunks_ = 1;
  std::vector<ReceivedChunk> received_;
  std::set<std::string> score_peers_;
  int max_unacknowledged_ = 0;
};

// Serves `service` on a free localhost port for the lifetime of the object.
class FakeServer {
 public:
  explicit FakeServer(grpc::Service* service) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(service);
    server_ = builder.BuildAndStart();
    EXPECT_NE(server_, nullptr);
    EXPECT_GT(port_, 0);
  }
  ~FakeServer() {
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  }

  std::string target() const { return absl::StrCat("127.0.0.1:", port_); }
  std::unique_ptr<kg::v1::KnowledgeGraph::Stub> NewStub() const {
    return kg::v1::KnowledgeGraph::NewStub(
        grpc::CreateChannel(target(), grpc::InsecureChannelCredentials()));
  }

 private:
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace grail

#endif  // GRAIL_TESTS_CLIENT_FAKE_KNOWLEDGE_GRAPH_H_
