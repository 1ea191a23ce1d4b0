// One graph across many replicas, through a NATS JetStream stream (the log).
//
// Write path: a replica validates an AddTriples or RemoveTriples chunk, publishes it to the
// stream with a message id (JetStream drops a republished id within its duplicate window, so
// a publish retried after a lost acknowledgement is stored once), and, once JetStream has
// stored it, waits until its own copy of the graph has applied it; the client's ack then
// carries the stream sequence and the chunk's counts as this replica applied them.
//
// Apply path: every replica reads the stream in order through its own durable pull consumer
// (named after the replica) and applies each chunk to its TripleStore with the chunk's
// stream sequence as the store's sequence, written in the same RocksDB batch as the chunk.
// The store's sequence is therefore the last stream entry applied, and survives kill -9 with
// the data it describes: a restarted replica starts its consumer right after it, so no chunk
// is applied twice or skipped. Every replica applies the same chunks in the same order to
// the same starting state, so all assign the same ids and hold the same graph.
//
// A chunk that the store rejects on apply (possible only if replicas run with different
// --allow-unknown-relations or vocabularies) is skipped by moving the sequence past it, on
// every replica alike, and logged. A replica that finds the stream trimmed past what it has
// applied cannot catch up from it: Start fails saying so, and the replica is bootstrapped
// from a checkpoint of another replica (CreateCheckpoint) plus the stream's tail
// (deploy/README.md, "Replication").
//
// Thread safety: Append may be called from any thread; the apply loop runs on its own.
#ifndef GRAIL_SERVER_REPLICATION_REPLICATION_H_
#define GRAIL_SERVER_REPLICATION_REPLICATION_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "store/triple_store.h"

namespace grail {

struct ReplicationOptions {
  // NATS server URLs, comma-separated (any node of a cluster; the client fails over).
  std::string url;
  // The JetStream stream holding the graph's chunks; created if missing.
  std::string stream;
  // Its subject; empty: "grail.<stream>.chunks".
  std::string subject;
  // This replica's name: its durable consumer's name. Unique per replica.
  std::string replica;
  // Used only when this replica creates the stream: copies JetStream keeps (1, 3 or 5; at
  // most the cluster's nodes), and the most chunks it keeps (0: no limit; older ones are
  // dropped, and a replica behind them must be bootstrapped from a checkpoint).
  int stream_replicas = 1;
  int64_t stream_max_chunks = 0;
  // How long Append retries a publish that JetStream has not acknowledged (a NATS node
  // down, a leader election), and then waits for the chunk to be applied here.
  std::chrono::milliseconds publish_timeout{30000};
  // How long Start tries to reach NATS.
  std::chrono::milliseconds connect_timeout{60000};
  // Structured log lines: an event name and a message.
  std::function<void(absl::string_view event, absl::string_view message)> log;
};

// What the apply loop has done, for metrics.
struct ReplicationStats {
  uint64_t applied = 0;          // stream sequence of the last chunk applied here
  uint64_t pending = 0;          // chunks in the stream after it, as of the last one read
  uint64_t published = 0;        // chunks this replica published
  uint64_t publish_retries = 0;  // publishes retried (no acknowledgement in time)
  uint64_t skipped = 0;          // chunks every replica rejects (see above)
  bool connected = false;        // connected to a NATS server now
  // The stream was trimmed past what this replica had applied: it applies nothing more
  // (it would have to skip chunks) and must be bootstrapped from a checkpoint.
  bool stalled = false;
};

enum class ChunkOp { kAdd, kRemove };

class Replicator {
 public:
  // Connects, creates the stream if missing, checks that `store` can follow it (FAILED_
  // PRECONDITION if the store is ahead of the stream's last entry, or the stream no longer
  // holds the entry after the store's: bootstrap from a checkpoint), and starts applying
  // from the store's sequence + 1. `store` must outlive the replicator.
  static absl::StatusOr<std::unique_ptr<Replicator>> Start(const ReplicationOptions& options,
                                                           TripleStore& store);
  // Stops the apply loop and closes the connection.
  ~Replicator();
  Replicator(const Replicator&) = delete;
  Replicator& operator=(const Replicator&) = delete;

  // Logs a chunk (`payload`: the serialized AddTriplesRequest or RemoveTriplesRequest, already
  // validated) and returns what applying it here did, its sequence being the stream's.
  // UNAVAILABLE if JetStream does not acknowledge it within publish_timeout (then it may or
  // may not be in the stream: resending is harmless), or if it is not applied here within
  // that time after (then it is in the stream, and will be applied).
  absl::StatusOr<ChunkResult> Append(ChunkOp op, const std::string& payload);

  // Waits until the chunks the stream held when Start ran are applied here; false on
  // timeout. The server calls it before it reports ready.
  bool WaitCaughtUp(std::chrono::milliseconds timeout);
  uint64_t last_sequence_at_start() const { return last_at_start_; }

  ReplicationStats stats() const;

 private:
  struct Nats;
  Replicator(const ReplicationOptions& options, TripleStore& store);
  absl::Status Connect();
  absl::Status PrepareStream();
  // Deletes and recreates this replica's durable consumer to deliver from `next`, and binds
  // a pull subscription to it.
  absl::Status ResetConsumer(uint64_t next);
  void ApplyLoop();
  // The stream's first sequence now (0 if NATS does not answer).
  uint64_t StreamFirstSequence();
  // Applies one stream entry (retrying while the store fails for a reason that may pass);
  // false if it must be read again from the stream (a gap before it) or the loop stops.
  bool ApplyEntry(void* msg);
  void Log(absl::string_view event, absl::string_view message) const;

  const ReplicationOptions options_;
  const std::string subject_;
  TripleStore& store_;
  std::unique_ptr<Nats> nats_;
  uint64_t last_at_start_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread apply_thread_;

  // Message ids of chunks this replica published and waits for, with their results.
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::optional<absl::StatusOr<ChunkResult>>> waiting_
      ABSL_GUARDED_BY(mu_);
  ReplicationStats stats_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 0;
  const std::string id_prefix_;
};

}  // namespace grail

#endif  // GRAIL_SERVER_REPLICATION_REPLICATION_H_
