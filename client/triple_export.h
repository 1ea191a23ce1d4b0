// Reads the ExportTriples stream: the facts of one version of the server's graph, in order of
// addition, page by page; and writes them as a triple file, the format the trainers read.
#ifndef GRAIL_CLIENT_TRIPLE_EXPORT_H_
#define GRAIL_CLIENT_TRIPLE_EXPORT_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "grpcpp/grpcpp.h"
#include "kg/v1/knowledge_graph.grpc.pb.h"

namespace grail {

struct ExportOptions {
  // Only the facts added by chunks after this sequence; 0: every fact.
  uint64_t since_sequence = 0;
  // Facts per message; 0: the server's default (10000).
  uint32_t page_facts = 0;
  // The export fails with DEADLINE_EXCEEDED when no page has arrived for this long (a
  // stalled server or network), in milliseconds; 0: no limit. The whole export has no
  // deadline: it takes as long as the graph is large.
  int64_t page_timeout_ms = 30000;
  // Applied to the call's context before it starts (the token, wait-for-ready).
  std::function<void(grpc::ClientContext*)> prepare;
};

struct ExportSummary {
  uint64_t graph_sequence = 0;  // the version exported
  uint64_t facts = 0;
  uint64_t pages = 0;
  double seconds = 0;
};

// Runs ExportTriples and hands each page to `on_page` as it arrives (a page of an empty
// export has no triples). An error from `on_page` cancels the call and is returned. The
// server's error (or a stream that ends before the server says it is complete) is returned
// as an absl::Status; what was handed to `on_page` before it is then incomplete.
absl::StatusOr<ExportSummary> ExportTriples(
    kg::v1::KnowledgeGraph::StubInterface& stub, const ExportOptions& options,
    const std::function<absl::Status(const kg::v1::ExportTriplesResponse&)>& on_page);

// ExportTriples into `path` as a triple file (head TAB relation TAB tail per line, in order
// of addition, so the last lines are the most recent facts). Written to `path`.partial and
// renamed into place once the export is complete, so `path` only ever holds a whole export;
// on any error it is left as it was. Errors: the call's, and INTERNAL naming the file for
// one that cannot be written.
absl::StatusOr<ExportSummary> ExportTriplesToFile(kg::v1::KnowledgeGraph::StubInterface& stub,
                                                  const ExportOptions& options,
                                                  const std::string& path);

}  // namespace grail

#endif  // GRAIL_CLIENT_TRIPLE_EXPORT_H_
