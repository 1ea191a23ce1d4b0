#include "server/replication/replication.h"

#include <unistd.h>

#include <random>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "kg/v1/knowledge_graph.pb.h"
#include "nats/nats.h"
#include "server/wire/chunk_parsing.h"

namespace grail {
namespace {

using Clock = std::chrono::steady_clock;

// The header naming what a stream entry does; its payload is the chunk's request message.
constexpr char kOpHeader[] = "Grail-Op";
constexpr char kAddOp[] = "add";
constexpr char kRemoveOp[] = "remove";
// JetStream's own header for the de-duplication id.
constexpr char kMsgIdHeader[] = "Nats-Msg-Id";

// Stream entries fetched per pull, and how long one pull waits for the first.
constexpr int kFetchBatch = 256;
constexpr int64_t kFetchWaitMs = 250;
// How long JetStream waits for an entry's ack before delivering it again. Entries are acked
// as they are applied, so this only matters after a lost ack, which the sequence check
// makes harmless.
constexpr int64_t kAckWaitNs = int64_t{60} * 1000 * 1000 * 1000;

std::string NatsError(natsStatus s, jsErrCode code = static_cast<jsErrCode>(0)) {
  std::string text = natsStatus_GetText(s);
  if (code != 0) absl::StrAppend(&text, " (JetStream error ", static_cast<int>(code), ")");
  const char* last = nats_GetLastError(nullptr);
  if (last != nullptr && *last != '\0' && text.find(last) == std::string::npos) {
    absl::StrAppend(&text, ": ", last);
  }
  return text;
}

}  // namespace

struct Replicator::Nats {
  natsOptions* options = nullptr;
  natsConnection* connection = nullptr;
  jsCtx* js = nullptr;
  natsSubscription* subscription = nullptr;  // used by the apply thread only (after Start)

  ~Nats() {
    if (subscription != nullptr) natsSubscription_Destroy(subscription);
    if (js != nullptr) jsCtx_Destroy(js);
    if (connection != nullptr) {
      natsConnection_Close(connection);
      natsConnection_Destroy(connection);
    }
    if (options != nullptr) natsOptions_Destroy(options);
  }
};

Replicator::Replicator(const ReplicationOptions& options, TripleStore& store)
    : options_(options),
      subject_(options.subject.empty() ? absl::StrCat("grail.", options.stream, ".chunks")
                                       : options.subject),
      store_(store),
      nats_(std::make_unique<Nats>()),
      // Unique per process start, so that ids from before a restart never collide.
      id_prefix_(absl::StrCat(options.replica, "-", getpid(), "-", std::random_device()(), "-")) {}

Replicator::~Replicator() {
  stopping_ = true;
  if (apply_thread_.joinable()) apply_thread_.join();
  {
    absl::MutexLock lock(&mu_);
    for (auto& [id, result] : waiting_) {
      if (!result.has_value()) result = absl::UnavailableError("the server is shutting down");
    }
  }
  nats_.reset();
  // Joins the library's own threads, so nothing of it outlives the process' shutdown.
  nats_CloseAndWait(2000);
}

void Replicator::Log(absl::string_view event, absl::string_view message) const {
  if (options_.log) options_.log(event, message);
}

absl::StatusOr<std::unique_ptr<Replicator>> Replicator::Start(const ReplicationOptions& options,
                                                              TripleStore& store) {
  if (options.url.empty() || options.stream.empty() || options.replica.empty()) {
    return absl::InvalidArgumentError("replication needs a NATS URL, a stream and a replica name");
  }
  std::unique_ptr<Replicator> replicator(new Replicator(options, store));
  if (absl::Status s = replicator->Connect(); !s.ok()) return s;
  if (absl::Status s = replicator->PrepareStream(); !s.ok()) return s;
  {
    absl::MutexLock lock(&replicator->mu_);
    replicator->stats_.applied = store.Snapshot()->sequence();
  }
  if (absl::Status s = replicator->ResetConsumer(store.Snapshot()->sequence() + 1); !s.ok()) {
    return s;
  }
  Replicator* self = replicator.get();
  replicator->apply_thread_ = std::thread([self] { self->ApplyLoop(); });
  return replicator;
}

absl::Status Replicator::Connect() {
  std::vector<std::string> urls = absl::StrSplit(options_.url, ',', absl::SkipWhitespace());
  std::vector<const char*> servers;
  for (std::string& url : urls) {
    url = std::string(absl::StripAsciiWhitespace(url));
    servers.push_back(url.c_str());
  }
  natsStatus s = natsOptions_Create(&nats_->options);
  if (s == NATS_OK) {
    s = natsOptions_SetServers(nats_->options, servers.data(), static_cast<int>(servers.size()));
  }
  // Reconnect forever (to any node it knows of), quickly: writes wait for it.
  if (s == NATS_OK) s = natsOptions_SetMaxReconnect(nats_->options, -1);
  if (s == NATS_OK) s = natsOptions_SetReconnectWait(nats_->options, 250);
  if (s == NATS_OK) s = natsOptions_SetTimeout(nats_->options, 2000);
  if (s == NATS_OK) s = natsOptions_SetName(nats_->options, options_.replica.c_str());
  if (s != NATS_OK) return absl::InvalidArgumentError(absl::StrCat("NATS options: ", NatsError(s)));
  const Clock::time_point give_up = Clock::now() + options_.connect_timeout;
  for (int attempt = 0;; ++attempt) {
    s = natsConnection_Connect(&nats_->connection, nats_->options);
    if (s == NATS_OK) break;
    if (Clock::now() >= give_up) {
      return absl::UnavailableError(
          absl::StrCat("cannot reach NATS at ", options_.url, ": ", NatsError(s)));
    }
    if (attempt % 20 == 0) {
      Log("replication_connecting", absl::StrCat("NATS at ", options_.url, ": ", NatsError(s)));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  jsOptions js_options;
  jsOptions_Init(&js_options);
  js_options.Wait = 5000;
  s = natsConnection_JetStream(&nats_->js, nats_->connection, &js_options);
  if (s != NATS_OK) return absl::UnavailableError(absl::StrCat("JetStream: ", NatsError(s)));
  return absl::OkStatus();
}

absl::Status Replicator::PrepareStream() {
  const uint64_t applied = store_.Snapshot()->sequence();
  jsStreamInfo* info = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  const Clock::time_point give_up = Clock::now() + options_.connect_timeout;
  natsStatus s;
  // A cluster that is still electing its meta leader answers with errors for a while.
  for (;;) {
    s = js_GetStreamInfo(&info, nats_->js, options_.stream.c_str(), nullptr, &code);
    if (s == NATS_NOT_FOUND) {
      jsStreamConfig config;
      jsStreamConfig_Init(&config);
      const char* subjects[] = {subject_.c_str()};
      config.Name = options_.stream.c_str();
      config.Subjects = subjects;
      config.SubjectsLen = 1;
      config.Storage = js_FileStorage;
      config.Replicas = options_.stream_replicas;
      config.MaxMsgs = options_.stream_max_chunks > 0 ? options_.stream_max_chunks : -1;
      code = static_cast<jsErrCode>(0);
      s = js_AddStream(&info, nats_->js, &config, nullptr, &code);
      if (s == NATS_OK) {
        Log("replication_stream_created",
            absl::StrCat("stream ", options_.stream, " on subject ", subject_, ", ",
                         options_.stream_replicas, " copies, ",
                         options_.stream_max_chunks > 0
                             ? absl::StrCat("at most ", options_.stream_max_chunks, " chunks")
                             : std::string("no chunk limit")));
      }
    }
    if (s == NATS_OK || Clock::now() >= give_up) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  if (s != NATS_OK) {
    return absl::UnavailableError(
        absl::StrCat("JetStream stream ", options_.stream, ": ", NatsError(s, code)));
  }
  const uint64_t first = info->State.FirstSeq;
  const uint64_t last = info->State.LastSeq;
  jsStreamInfo_Destroy(info);
  last_at_start_ = last;
  if (applied > last) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the store is at sequence ", applied, " but stream ", options_.stream, " ends at ", last,
        ": the store belongs to another stream (or the stream was recreated). Start this "
        "replica on an empty --data-dir, or on a checkpoint of a replica of this stream"));
  }
  // Entries applied+1 .. first-1 are gone from the stream (an empty stream has first =
  // last + 1, which is fine when this replica has applied them all).
  if (first > applied + 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        "stream ", options_.stream, " starts at sequence ", first, " but this store has applied ",
        applied, ": chunks ", applied + 1, "..", first - 1,
        " were trimmed from the stream, so this replica cannot catch up from it. Bootstrap it "
        "from a checkpoint of another replica (CreateCheckpoint; deploy/README.md, "
        "\"Replication\")"));
  }
  return absl::OkStatus();
}

absl::Status Replicator::ResetConsumer(uint64_t next) {
  if (nats_->subscription != nullptr) {
    natsSubscription_Destroy(nats_->subscription);
    nats_->subscription = nullptr;
  }
  jsErrCode code = static_cast<jsErrCode>(0);
  // Whatever the old consumer had delivered and not seen acknowledged would be delivered
  // again only after its ack wait, after later entries: start it afresh at `next` instead.
  natsStatus s = js_DeleteConsumer(nats_->js, options_.stream.c_str(), options_.replica.c_str(),
                                   nullptr, &code);
  if (s != NATS_OK && s != NATS_NOT_FOUND) {
    return absl::UnavailableError(
        absl::StrCat("deleting consumer ", options_.replica, ": ", NatsError(s, code)));
  }
  jsConsumerConfig config;
  jsConsumerConfig_Init(&config);
  config.Durable = options_.replica.c_str();
  config.DeliverPolicy = js_DeliverByStartSequence;
  config.OptStartSeq = next;
  config.AckPolicy = js_AckExplicit;
  config.AckWait = kAckWaitNs;
  config.MaxAckPending = kFetchBatch;
  config.FilterSubject = subject_.c_str();
  jsConsumerInfo* info = nullptr;
  code = static_cast<jsErrCode>(0);
  s = js_AddConsumer(&info, nats_->js, options_.stream.c_str(), &config, nullptr, &code);
  if (s != NATS_OK) {
    return absl::UnavailableError(
        absl::StrCat("creating consumer ", options_.replica, ": ", NatsError(s, code)));
  }
  jsConsumerInfo_Destroy(info);
  jsSubOptions sub_options;
  jsSubOptions_Init(&sub_options);
  sub_options.Stream = options_.stream.c_str();
  sub_options.Consumer = options_.replica.c_str();
  code = static_cast<jsErrCode>(0);
  s = js_PullSubscribe(&nats_->subscription, nats_->js, subject_.c_str(), options_.replica.c_str(),
                       nullptr, &sub_options, &code);
  if (s != NATS_OK) {
    return absl::UnavailableError(
        absl::StrCat("subscribing through consumer ", options_.replica, ": ", NatsError(s, code)));
  }
  return absl::OkStatus();
}

uint64_t Replicator::StreamFirstSequence() {
  jsStreamInfo* info = nullptr;
  if (js_GetStreamInfo(&info, nats_->js, options_.stream.c_str(), nullptr, nullptr) != NATS_OK) {
    return 0;  // unknown: treated as not trimmed, and the consumer is reset as usual
  }
  const uint64_t first = info->State.FirstSeq;
  jsStreamInfo_Destroy(info);
  return first;
}

void Replicator::ApplyLoop() {
  Clock::time_point last_complaint;
  while (!stopping_) {
    if (nats_->subscription == nullptr) {
      // A reset failed (NATS unreachable): try again.
      const absl::Status reset = ResetConsumer(store_.Snapshot()->sequence() + 1);
      if (!reset.ok()) {
        if (Clock::now() - last_complaint > std::chrono::seconds(10)) {
          Log("replication_error", reset.message());
          last_complaint = Clock::now();
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(250));
      }
      continue;
    }
    natsMsgList list{};
    jsErrCode code = static_cast<jsErrCode>(0);
    const natsStatus s =
        natsSubscription_Fetch(&list, nats_->subscription, kFetchBatch, kFetchWaitMs, &code);
    if (s == NATS_TIMEOUT) continue;
    if (s != NATS_OK) {
      if (Clock::now() - last_complaint > std::chrono::seconds(10)) {
        Log("replication_error",
            absl::StrCat("reading stream ", options_.stream, ": ", NatsError(s, code)));
        last_complaint = Clock::now();
      }
      // The consumer may be gone with the node that led it, or the connection down: make
      // sure the next pull reads from the right place.
      if (s != NATS_CONNECTION_DISCONNECTED && s != NATS_CONNECTION_CLOSED) {
        natsSubscription_Destroy(nats_->subscription);
        nats_->subscription = nullptr;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    for (int i = 0; i < list.Count && !stopping_; ++i) {
      if (!ApplyEntry(list.Msgs[i])) {
        // A gap: re-read from the entry after the last one applied, unless the stream no
        // longer holds it (trimmed while this replica was behind): then no order of reads
        // can make this replica whole, and it stops applying rather than skip chunks.
        const uint64_t next = store_.Snapshot()->sequence() + 1;
        if (const uint64_t first = StreamFirstSequence(); first > next) {
          Log("replication_stalled",
              absl::StrCat("stream ", options_.stream, " starts at sequence ", first, ": chunks ",
                           next, "..", first - 1,
                           " were trimmed before this replica applied them. It serves its "
                           "graph as of sequence ",
                           next - 1,
                           " and applies nothing more; bootstrap it from a checkpoint of "
                           "another replica (deploy/README.md, \"Replication\")"));
          natsMsgList_Destroy(&list);
          absl::MutexLock lock(&mu_);
          stats_.stalled = true;
          return;  // the apply thread ends; the replica serves what it has
        }
        const absl::Status reset = ResetConsumer(next);
        if (!reset.ok()) Log("replication_error", reset.message());
        break;
      }
    }
    natsMsgList_Destroy(&list);
  }
}

bool Replicator::ApplyEntry(void* raw) {
  natsMsg* msg = static_cast<natsMsg*>(raw);
  jsMsgMetaData* meta = nullptr;
  if (natsMsg_GetMetaData(&meta, msg) != NATS_OK) return true;  // not a stream entry
  const uint64_t sequence = meta->Sequence.Stream;
  const uint64_t pending = meta->NumPending;
  jsMsgMetaData_Destroy(meta);
  const uint64_t applied = store_.Snapshot()->sequence();
  if (sequence <= applied) {  // delivered again; applied already
    natsMsg_Ack(msg, nullptr);
    return true;
  }
  if (sequence != applied + 1) {
    Log("replication_gap", absl::StrCat("read stream entry ", sequence, " after ", applied,
                                        "; re-reading from ", applied + 1));
    return false;
  }

  const char* op = nullptr;
  natsMsgHeader_Get(msg, kOpHeader, &op);
  const char* id = nullptr;
  natsMsgHeader_Get(msg, kMsgIdHeader, &id);
  const std::string message_id = id != nullptr ? id : "";
  const absl::string_view data(natsMsg_GetData(msg), natsMsg_GetDataLength(msg));

  absl::StatusOr<ChunkResult> result;
  std::vector<NamedTriple> facts;
  std::vector<std::string> entities, relations;
  bool adding = false;
  absl::Status parsed;
  if (op != nullptr && absl::string_view(op) == kAddOp) {
    kg::v1::AddTriplesRequest chunk;
    if (!chunk.ParseFromArray(data.data(), static_cast<int>(data.size()))) {
      parsed = absl::InvalidArgumentError("an add entry whose payload does not parse");
    }
    for (const kg::v1::Triple& t : chunk.triples()) facts.push_back(ToNamed(t));
    adding = true;
  } else if (op != nullptr && absl::string_view(op) == kRemoveOp) {
    kg::v1::RemoveTriplesRequest chunk;
    if (!chunk.ParseFromArray(data.data(), static_cast<int>(data.size()))) {
      parsed = absl::InvalidArgumentError("a remove entry whose payload does not parse");
    }
    for (const kg::v1::Triple& t : chunk.triples()) facts.push_back(ToNamed(t));
    entities.assign(chunk.entities().begin(), chunk.entities().end());
    relations.assign(chunk.relations().begin(), chunk.relations().end());
  } else {
    parsed =
        absl::InvalidArgumentError(absl::StrCat("an entry without a known ", kOpHeader, " header"));
  }

  for (int attempt = 0;; ++attempt) {
    if (!parsed.ok()) {
      result = parsed;
    } else {
      result = adding ? store_.AddChunk(facts, sequence)
                      : store_.RemoveChunk(facts, entities, relations, sequence);
    }
    if (result.ok()) break;
    if (absl::IsInvalidArgument(result.status()) || RejectedFactIndex(result.status())) {
      // Deterministic: every replica rejects it alike (a bad name, a relation outside the
      // vocabulary, a fact past --max-relation-pairs on the graph every replica holds at this
      // sequence). Skip it, durably, so a restart does not read it again.
      Log("replication_skipped_chunk",
          absl::StrCat("stream entry ", sequence, " was not applied: ", result.status().message()));
      absl::StatusOr<ChunkResult> skipped = store_.AdvanceSequence(sequence);
      if (skipped.ok()) {
        absl::MutexLock lock(&mu_);
        ++stats_.skipped;
        break;
      }
      result = skipped.status();
    }
    // The store cannot write now (a full disk): hold the entry and try again.
    if (attempt % 40 == 0) {
      Log("replication_error", absl::StrCat("applying stream entry ", sequence, ": ",
                                            result.status().message(), " (retrying)"));
    }
    if (stopping_) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  natsMsg_Ack(msg, nullptr);
  absl::MutexLock lock(&mu_);
  stats_.applied = sequence;
  stats_.pending = pending;
  if (auto it = waiting_.find(message_id); it != waiting_.end() && !it->second.has_value()) {
    it->second = std::move(result);
  }
  return true;
}

absl::StatusOr<ChunkResult> Replicator::Append(ChunkOp op, const std::string& payload) {
  std::string id;
  {
    absl::MutexLock lock(&mu_);
    id = absl::StrCat(id_prefix_, ++next_id_);
    waiting_.emplace(id, std::nullopt);
  }
  struct Forget {
    Replicator* self;
    const std::string& id;
    ~Forget() {
      absl::MutexLock lock(&self->mu_);
      self->waiting_.erase(id);
    }
  } forget{this, id};

  const Clock::time_point give_up = Clock::now() + options_.publish_timeout;
  uint64_t sequence = 0;
  std::string last_error;
  for (int attempt = 0; sequence == 0; ++attempt) {
    if (Clock::now() >= give_up || stopping_) {
      return absl::UnavailableError(
          absl::StrCat("the chunk could not be logged in stream ", options_.stream, " within ",
                       options_.publish_timeout.count(), " ms (", last_error,
                       "); it may or may not have been stored: resend it (resending is harmless)"));
    }
    if (attempt > 0) {
      absl::MutexLock lock(&mu_);
      ++stats_.publish_retries;
    }
    natsMsg* msg = nullptr;
    natsStatus s = natsMsg_Create(&msg, subject_.c_str(), nullptr, payload.data(),
                                  static_cast<int>(payload.size()));
    if (s == NATS_OK)
      s = natsMsgHeader_Set(msg, kOpHeader, op == ChunkOp::kAdd ? kAddOp : kRemoveOp);
    jsPubOptions publish;
    jsPubOptions_Init(&publish);
    publish.MsgId = id.c_str();  // the same id on every retry: stored once
    publish.ExpectStream = options_.stream.c_str();
    publish.MaxWait = std::min<int64_t>(
        5000,
        std::max<int64_t>(
            1,
            std::chrono::duration_cast<std::chrono::milliseconds>(give_up - Clock::now()).count()));
    jsPubAck* ack = nullptr;
    jsErrCode code = static_cast<jsErrCode>(0);
    if (s == NATS_OK) s = js_PublishMsg(&ack, nats_->js, msg, &publish, &code);
    if (msg != nullptr) natsMsg_Destroy(msg);
    if (s == NATS_OK) {
      sequence = ack->Sequence;
      jsPubAck_Destroy(ack);
      break;
    }
    last_error = NatsError(s, code);
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(50 * (attempt + 1), 500)));
  }
  {
    absl::MutexLock lock(&mu_);
    ++stats_.published;
  }

  // Stored in the stream: wait for this replica to apply it, so that the ack's promise
  // (visible to every later call here) holds.
  absl::MutexLock lock(&mu_);
  const auto applied = [this, &id]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const auto it = waiting_.find(id);
    return it == waiting_.end() || it->second.has_value() || stopping_.load();
  };
  mu_.AwaitWithDeadline(
      absl::Condition(&applied),
      absl::FromChrono(std::chrono::system_clock::now() +
                       std::max(options_.publish_timeout, std::chrono::milliseconds(1000))));
  const auto it = waiting_.find(id);
  if (it != waiting_.end() && it->second.has_value()) return *std::move(it->second);
  return absl::UnavailableError(absl::StrCat(
      "the chunk is logged at stream sequence ", sequence, " but this replica has applied only ",
      stats_.applied, " so far; it will be applied (read with min_graph_sequence ", sequence, ")"));
}

bool Replicator::WaitCaughtUp(std::chrono::milliseconds timeout) {
  absl::MutexLock lock(&mu_);
  const auto done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stats_.applied >= last_at_start_;
  };
  return mu_.AwaitWithTimeout(absl::Condition(&done), absl::FromChrono(timeout));
}

ReplicationStats Replicator::stats() const {
  ReplicationStats stats;
  {
    absl::MutexLock lock(&mu_);
    stats = stats_;
  }
  // Read from the client library now (it is thread-safe), not kept up to date by hand.
  stats.connected = natsConnection_Status(nats_->connection) == NATS_CONN_STATUS_CONNECTED;
  return stats;
}

}  // namespace grail
