// Streams a triple source into the AddTriples (or RemoveTriples) RPC, chunk by chunk, and
// accounts for what the server applied.
//
// One thread writes chunks while the calling thread reads acknowledgements; at most
// `window` chunks are sent and not yet acknowledged, which keeps the server busy without
// buffering the whole file. Acknowledgements come in chunk order, so after any failure the
// report says exactly which chunks are stored: every acknowledged one, and none after it.
#ifndef GRAIL_CLIENT_TRIPLE_UPLOAD_H_
#define GRAIL_CLIENT_TRIPLE_UPLOAD_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>

#include "absl/status/status.h"
#include "client/triple_source.h"
#include "grpcpp/support/status.h"
#include "kg/v1/knowledge_graph.grpc.pb.h"

namespace grail {

struct UploadReport;

struct UploadOptions {
  // Chunks sent and not yet acknowledged, at most (>= 1).
  size_t window = 8;
  // The upload fails with DEADLINE_EXCEEDED when chunks are waiting and none has been
  // acknowledged for this long (a stalled server or network), in milliseconds. 0: no limit.
  int64_t ack_timeout_ms = 30000;
  // Wait for the server to come up instead of failing at once with UNAVAILABLE.
  bool wait_for_ready = false;
  // Remove the source's facts (RemoveTriples) instead of adding them (AddTriples).
  bool remove = false;
  // Called on the calling thread after each acknowledgement, with the report so far.
  std::function<void(const UploadReport&)> on_ack;
};

// Where a chunk came from.
struct ChunkSpan {
  uint64_t chunk_index = 0;  // 0-based, in the stream
  uint64_t first_line = 0;
  uint64_t last_line = 0;
  size_t facts = 0;
};

struct UploadReport {
  uint64_t chunks_sent = 0;
  // Totals over the acknowledged chunks, which are exactly those stored by the server.
  uint64_t chunks_acknowledged = 0;
  uint64_t facts_acknowledged = 0;  // facts in the acknowledged chunks
  uint64_t facts_added = 0;
  uint64_t duplicate_facts = 0;
  uint64_t entities_created = 0;
  uint64_t relations_created = 0;
  uint64_t facts_removed = 0;      // RemoveTriples
  uint64_t facts_not_present = 0;  // RemoveTriples
  uint64_t last_sequence = 0;      // graph version of the last acknowledgement (0: none)
  double seconds = 0;              // from opening the stream to its end
  // The stream's outcome: the server's status (e.g. INVALID_ARGUMENT for a rejected chunk),
  // DEADLINE_EXCEEDED from ack_timeout_ms, or INTERNAL for acknowledgements out of order.
  grpc::Status status;
  // A malformed line or unreadable source: the chunk holding it and everything after it
  // were not sent; the chunks before it were (and `status` says how that went).
  absl::Status source_error;
  // The first chunk sent and not acknowledged (so not stored), if any.
  std::optional<ChunkSpan> first_unacknowledged;

  bool ok() const { return status.ok() && source_error.ok(); }
  double facts_per_second() const { return seconds > 0 ? facts_acknowledged / seconds : 0; }
};

// Sends every chunk `reader` yields over one AddTriples (RemoveTriples with
// options.remove) stream, each request's first_line
// set to its chunk's first line, and returns when the stream has ended. Never throws;
// every failure is in the report.
UploadReport UploadTriples(kg::v1::KnowledgeGraph::StubInterface* stub, TripleChunkReader* reader,
                           const UploadOptions& options);

}  // namespace grail

#endif  // GRAIL_CLIENT_TRIPLE_UPLOAD_H_
