#include "client/triple_upload.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "grpcpp/client_context.h"

namespace grail {
namespace {

using Clock = std::chrono::steady_clock;
// What differs between the AddTriples and the RemoveTriples stream.
struct AddStream {
  using Request = kg::v1::AddTriplesRequest;
  using Ack = kg::v1::AddTriplesAck;
  static auto Open(kg::v1::KnowledgeGraph::StubInterface* stub, grpc::ClientContext* context) {
    return stub->AddTriples(context);
  }
  static void Count(const Ack& ack, UploadReport* report) {
    report->facts_added += ack.facts_added();
    report->duplicate_facts += ack.duplicate_facts();
    report->entities_created += ack.entities_created();
    report->relations_created += ack.relations_created();
  }
};

struct RemoveStream {
  using Request = kg::v1::RemoveTriplesRequest;
  using Ack = kg::v1::RemoveTriplesAck;
  static auto Open(kg::v1::KnowledgeGraph::StubInterface* stub, grpc::ClientContext* context) {
    return stub->RemoveTriples(context);
  }
  static void Count(const Ack& ack, UploadReport* report) {
    report->facts_removed += ack.facts_removed();
    report->facts_not_present += ack.facts_not_present();
  }
};

// What the writer, the acknowledgement reader and the watchdog share.
struct UploadState {
  std::mutex mu;
  std::condition_variable changed;
  std::deque<ChunkSpan> in_flight;  // sent (or being sent), not acknowledged; in order
  bool stop = false;                // the stream has ended: stop writing
  bool finished = false;            // Finish() returned: stop watching
  bool timed_out = false;
  uint64_t chunks_sent = 0;
  absl::Status source_error;
  Clock::time_point last_progress;  // last acknowledgement, or when the oldest chunk was sent
};

template <typename Kind>
void WriteChunks(
    TripleChunkReader* reader, size_t window,
    grpc::ClientReaderWriterInterface<typename Kind::Request, typename Kind::Ack>* stream,
    UploadState* state) {
  TripleChunk chunk;
  typename Kind::Request request;
  for (uint64_t index = 0;; ++index) {
    {
      std::unique_lock<std::mutex> lock(state->mu);
      state->changed.wait(lock, [&] { return state->stop || state->in_flight.size() < window; });
      if (state->stop) break;
    }
    // Reading the whole chunk before sending any of it means a malformed line stops the
    // upload with nothing of its chunk sent.
    absl::StatusOr<bool> more = reader->Next(&chunk);
    if (!more.ok()) {
      std::lock_guard<std::mutex> lock(state->mu);
      state->source_error = more.status();
      break;
    }
    if (!*more) break;
    request.Clear();
    request.set_first_line(chunk.first_line);
    request.mutable_triples()->Reserve(static_cast<int>(chunk.triples.size()));
    for (SourceTriple& t : chunk.triples) {
      kg::v1::Triple* triple = request.add_triples();
      triple->set_head(std::move(t.head));
      triple->set_relation(std::move(t.relation));
      triple->set_tail(std::move(t.tail));
    }
    {
      std::lock_guard<std::mutex> lock(state->mu);
      if (state->in_flight.empty()) state->last_progress = Clock::now();
      state->in_flight.push_back(
          ChunkSpan{index, chunk.first_line, chunk.last_line(), chunk.triples.size()});
    }
    state->changed.notify_all();
    // Fails only when the call has ended; the reader learns why from Finish().
    if (!stream->Write(request)) break;
    std::lock_guard<std::mutex> lock(state->mu);
    ++state->chunks_sent;
  }
  stream->WritesDone();
}

// Cancels the call when chunks wait longer than `timeout` for an acknowledgement.
void WatchAcknowledgements(std::chrono::milliseconds timeout, grpc::ClientContext* context,
                           UploadState* state) {
  std::unique_lock<std::mutex> lock(state->mu);
  while (!state->finished) {
    if (state->in_flight.empty() || state->stop) {
      state->changed.wait(lock);
      continue;
    }
    const Clock::time_point due = state->last_progress + timeout;
    if (Clock::now() >= due) {
      state->timed_out = true;
      context->TryCancel();
      return;
    }
    state->changed.wait_until(lock, due);
  }
}

template <typename Kind>
UploadReport Upload(kg::v1::KnowledgeGraph::StubInterface* stub, TripleChunkReader* reader,
                    const UploadOptions& options) {
  UploadReport report;
  const Clock::time_point start = Clock::now();
  grpc::ClientContext context;
  context.set_wait_for_ready(options.wait_for_ready);
  UploadState state;
  auto stream = Kind::Open(stub, &context);

  std::thread writer(WriteChunks<Kind>, reader, std::max<size_t>(options.window, 1), stream.get(),
                     &state);
  std::thread watchdog;
  if (options.ack_timeout_ms > 0) {
    watchdog = std::thread(WatchAcknowledgements, std::chrono::milliseconds(options.ack_timeout_ms),
                           &context, &state);
  }

  grpc::Status protocol_error;
  typename Kind::Ack ack;
  while (stream->Read(&ack)) {
    {
      std::lock_guard<std::mutex> lock(state.mu);
      if (state.in_flight.empty() || ack.chunk_index() != state.in_flight.front().chunk_index) {
        protocol_error = grpc::Status(
            grpc::StatusCode::INTERNAL,
            absl::StrCat("the server acknowledged chunk ", ack.chunk_index(), ", expected ",
                         state.in_flight.empty()
                             ? std::string("no acknowledgement")
                             : absl::StrCat("chunk ", state.in_flight.front().chunk_index)));
        context.TryCancel();
        break;
      }
      const ChunkSpan acknowledged = state.in_flight.front();
      state.in_flight.pop_front();
      state.last_progress = Clock::now();
      report.chunks_sent = state.chunks_sent;
      report.chunks_acknowledged += 1;
      report.facts_acknowledged += acknowledged.facts;
    }
    state.changed.notify_all();
    Kind::Count(ack, &report);
    report.last_sequence = ack.sequence();
    report.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (options.on_ack) options.on_ack(report);
  }
  {
    std::lock_guard<std::mutex> lock(state.mu);
    state.stop = true;
  }
  state.changed.notify_all();
  writer.join();
  grpc::Status status = stream->Finish();
  {
    std::lock_guard<std::mutex> lock(state.mu);
    state.finished = true;
  }
  state.changed.notify_all();
  if (watchdog.joinable()) watchdog.join();

  report.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  report.chunks_sent = state.chunks_sent;
  report.source_error = state.source_error;
  if (!state.in_flight.empty()) report.first_unacknowledged = state.in_flight.front();
  if (!protocol_error.ok()) {
    report.status = protocol_error;
  } else if (state.timed_out) {
    report.status = grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                                 absl::StrCat("no acknowledgement within ", options.ack_timeout_ms,
                                              " ms (", state.in_flight.size(), " chunks waiting)"));
  } else {
    report.status = status;
    if (status.ok() && report.first_unacknowledged) {
      // The server ended the stream cleanly without acknowledging everything.
      report.status =
          grpc::Status(grpc::StatusCode::INTERNAL,
                       absl::StrCat("the stream ended without an acknowledgement for chunk ",
                                    report.first_unacknowledged->chunk_index));
    }
  }
  return report;
}

}  // namespace

UploadReport UploadTriples(kg::v1::KnowledgeGraph::StubInterface* stub, TripleChunkReader* reader,
                           const UploadOptions& options) {
  return options.remove ? Upload<RemoveStream>(stub, reader, options)
                        : Upload<AddStream>(stub, reader, options);
}

}  // namespace grail
