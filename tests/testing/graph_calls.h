// The KnowledgeGraph calls integration tests make over and over: a triple as a proto,
// chunks streamed through AddTriples or RemoveTriples one at a time (each chunk's ack read
// before the next is sent), a ranking of tails or heads, and requests with names that are
// not UTF-8.
#ifndef GRAIL_TESTS_TESTING_GRAPH_CALLS_H_
#define GRAIL_TESTS_TESTING_GRAPH_CALLS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "google/protobuf/message_lite.h"
#include "graph/triple_file.h"
#include "grpcpp/grpcpp.h"
#include "kg/v1/knowledge_graph.grpc.pb.h"

namespace grail {

inline kg::v1::Triple ToProto(const NamedTriple& t) {
  kg::v1::Triple p;
  p.set_head(t.head);
  p.set_relation(t.relation);
  p.set_tail(t.tail);
  return p;
}

// The acks of a chunk stream and its final status.
template <typename Ack>
struct StreamOutcome {
  std::vector<Ack> acks;
  grpc::Status status;
};
using AddOutcome = StreamOutcome<kg::v1::AddTriplesAck>;
using RemoveOutcome = StreamOutcome<kg::v1::RemoveTriplesAck>;

// Sends `chunks` over `stream`, numbering lines from `first_line` (0: leave it unset).
template <typename Request, typename Ack>
StreamOutcome<Ack> StreamChunks(grpc::ClientContext* context,
                                grpc::ClientReaderWriter<Request, Ack>* stream,
                                const std::vector<std::vector<NamedTriple>>& chunks,
                                uint64_t first_line) {
  StreamOutcome<Ack> outcome;
  uint64_t line = first_line;
  for (const auto& chunk : chunks) {
    Request request;
    for (const NamedTriple& t : chunk) *request.add_triples() = ToProto(t);
    request.set_first_line(line);
    if (line > 0) line += chunk.size();
    if (!stream->Write(request)) break;
    Ack ack;
    if (!stream->Read(&ack)) break;
    outcome.acks.push_back(ack);
  }
  stream->WritesDone();
  outcome.status = stream->Finish();
  return outcome;
}

// Raw bytes for calls grail-client would never send: `message` serialized with every "BAD"
// turned into three bytes that are not UTF-8.
inline grpc::ByteBuffer WithInvalidUtf8(const google::protobuf::MessageLite& message) {
  std::string bytes = message.SerializeAsString();
  for (size_t at = bytes.find("BAD"); at != std::string::npos; at = bytes.find("BAD", at)) {
    bytes.replace(at, 3, "\xff\xfe\xc0");
  }
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

inline AddOutcome AddChunks(kg::v1::KnowledgeGraph::Stub& stub,
                            const std::vector<std::vector<NamedTriple>>& chunks,
                            uint64_t first_line = 0) {
  grpc::ClientContext context;
  auto stream = stub.AddTriples(&context);
  return StreamChunks(&context, stream.get(), chunks, first_line);
}

inline RemoveOutcome RemoveChunks(kg::v1::KnowledgeGraph::Stub& stub,
                                  const std::vector<std::vector<NamedTriple>>& chunks,
                                  uint64_t first_line = 0) {
  grpc::ClientContext context;
  auto stream = stub.RemoveTriples(&context);
  return StreamChunks(&context, stream.get(), chunks, first_line);
}

// RankTails of (fixed, relation, ?) when `tails`, else RankHeads of (?, relation, fixed).
inline grpc::Status RankCall(kg::v1::KnowledgeGraph::Stub& stub, bool tails,
                             const std::string& fixed, const std::string& relation,
                             const kg::v1::RankOptions& options, kg::v1::RankResponse* response) {
  grpc::ClientContext context;
  if (tails) {
    kg::v1::RankTailsRequest request;
    request.set_head(fixed);
    request.set_relation(relation);
    *request.mutable_options() = options;
    return stub.RankTails(&context, request, response);
  }
  kg::v1::RankHeadsRequest request;
  request.set_tail(fixed);
  request.set_relation(relation);
  *request.mutable_options() = options;
  return stub.RankHeads(&context, request, response);
}

}  // namespace grail

#endif  // GRAIL_TESTS_TESTING_GRAPH_CALLS_H_
