// grail-server's configuration: every flag read once, range-checked, into the options of the
// parts it configures. server_config.cc holds each flag once: its definition (ABSL_FLAG: type,
// default, help) and, for a number, one row of the flag table (range, the option it sets,
// and its key in the `start` log line, which is its name).
//
// Every flag can also be set through the environment as GRAIL_<FLAG> (e.g. GRAIL_DATA_DIR); the
// command line wins (common/command_line.h).
#ifndef GRAIL_SERVER_RPC_SERVER_CONFIG_H_
#define GRAIL_SERVER_RPC_SERVER_CONFIG_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "common/json.h"
#include "model/core/archive_probe.h"
#include "server/engine/inference_engine.h"
#include "server/replication/replication.h"
#include "server/rpc/graph_service.h"
#include "server/rpc/transport_security.h"
#include "server/scoring/link_predictor.h"
#include "server/scoring/served_model.h"
#include "store/triple_store.h"

namespace grail {

struct ServerConfig {
  std::string model_path;
  std::string data_dir;
  std::string host;
  int port = 0;
  int metrics_port = 0;  // -1: off
  std::string device;
  EngineOptions engine;
  ServiceLimits limits;
  RankLimits rank_limits;
  int64_t pass_cache_bytes = 0;  // LinkPredictor's
  int compute_threads = 0;
  int max_message_bytes = 0;
  // The store's durability and limits (its callbacks are the server's to set).
  StoreOptions store;
  bool allow_unknown_relations = false;
  int drain_seconds = 0;
  ArchiveLoadLimits archive_limits;
  WarmupOptions warmup;
  ServerTlsFiles tls;
  std::string auth_tokens;  // the token file, or empty
  bool reflection = true;
  // With a NATS URL (replication.url non-empty); replica defaults to the host name.
  ReplicationOptions replication;
  int max_sequence_wait_ms = 0;
  OnlineEvalOptions online_eval;  // rate 0: off
  std::string ready_file;

  bool replicated() const { return !replication.url.empty(); }
  bool use_tls() const { return !tls.cert.empty() || !tls.key.empty() || !tls.client_ca.empty(); }
};

// Reads the flags. INVALID_ARGUMENT with one line for a usage error: a number outside its
// range ("--port=70000 is out of range: it takes 0..65535", never clamped or wrapped), a
// required flag missing, flags that go together given alone.
absl::StatusOr<ServerConfig> ReadServerConfig();

// The `start` log line's fields: every flag's value (the effective one: a thread count of 0
// is the cores'), keyed by the flag's name.
Json ConfigLogFields(const ServerConfig& config);

}  // namespace grail

#endif  // GRAIL_SERVER_RPC_SERVER_CONFIG_H_
