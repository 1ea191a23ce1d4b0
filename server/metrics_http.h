// The plain-HTTP side endpoint of the server, for Prometheus and for probes:
//   GET /metrics  200, the registry's exposition (Content-Type kExpositionContentType)
//   GET /healthz  200 "ok" as long as the process serves HTTP at all (liveness)
//   GET /readyz   200 "ready" while the readiness callback returns true, else 503
//                 "not ready" (e.g. while the model loads or the store opens)
// Anything else is 404. Served by cpp-httplib on its own listener thread and a small pool
// of worker threads, apart from the gRPC server, so a scrape never competes with its
// completion queues.
#ifndef GRAIL_SERVER_METRICS_HTTP_H_
#define GRAIL_SERVER_METRICS_HTTP_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "server/metrics.h"

namespace httplib {
class Server;
}  // namespace httplib

namespace grail {

// Thread safety: Start, Stop and port are for one controlling thread; the callbacks run on
// the HTTP worker threads, concurrently with each other and with everything else.
class MetricsHttpServer {
 public:
  // `registry` must outlive the server. `ready` answers /readyz; it must be thread-safe and
  // quick. An empty `ready` means ready whenever the endpoint is up.
  MetricsHttpServer(const MetricsRegistry* registry, std::function<bool()> ready);
  // Stops the server if it is running.
  ~MetricsHttpServer();
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  // Binds host:port (port 0: any free port, see port()) and serves on a new thread; returns
  // once the listener accepts connections. Errors: INVALID_ARGUMENT for a port outside
  // 0..65535; UNAVAILABLE if the address cannot be bound (port in use, unknown host),
  // with the system's reason; FAILED_PRECONDITION if already started; INTERNAL if the
  // listener thread fails at once.
  absl::Status Start(const std::string& host, int port);

  // Closes the listener and joins its thread, after the requests being served finish. A
  // no-op if not started. Start may be called again afterwards.
  void Stop();

  // The bound port while started, else -1.
  int port() const { return port_; }

 private:
  const MetricsRegistry* const registry_;
  const std::function<bool()> ready_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  // Set by the listener thread when listen_after_bind returns.
  std::atomic<bool> listener_done_{false};
  int port_ = -1;
};

}  // namespace grail

#endif  // GRAIL_SERVER_METRICS_HTTP_H_
