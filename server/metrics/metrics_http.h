// The plain-HTTP side endpoint of the server, for Prometheus and for probes:
//   GET /metrics  200, the exposition text (Content-Type kExpositionContentType)
//   GET /healthz  200 "ok" as long as the process serves HTTP at all (liveness)
//   GET /readyz   200 "ready" while the readiness callback returns true, else 503
//                 "not ready" (e.g. while the model loads or the store opens)
// Anything else is 404 (405 for a method other than GET or HEAD).
//
// Served by libmicrohttpd, event-driven (epoll) on a few threads of its own, apart from the
// gRPC server: an idle or slow connection costs a socket, not a thread, so no number of
// them below the connection cap delays a probe. Connections idle for longer than a timeout
// are closed, and connections beyond a cap (in all, and per client address) are refused
// at once, so the endpoint's memory is bounded too.
#ifndef GRAIL_SERVER_METRICS_METRICS_HTTP_H_
#define GRAIL_SERVER_METRICS_METRICS_HTTP_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "server/metrics/metrics.h"

struct MHD_Daemon;

namespace grail {

// Thread safety: Start, Stop and port are for one controlling thread; the callbacks run on
// the HTTP worker threads, concurrently with each other and with everything else.
struct MetricsHttpOptions {
  int max_connections = 512;         // open connections at once, shared out among the threads
  int max_connections_per_ip = 128;  // from one client address
  int idle_timeout_seconds = 10;     // a connection silent this long is closed
  int threads = 4;                   // event loops (each serves many connections)
};

class MetricsHttpServer {
 public:
  // `render` returns what /metrics serves (RenderExposition of the process's collectables);
  // `ready` answers /readyz. Both must be thread-safe, and whatever they read must outlive
  // the server (or its Stop). An empty `ready` means ready whenever the endpoint is up.
  MetricsHttpServer(std::function<std::string()> render, std::function<bool()> ready,
                    MetricsHttpOptions options = {});
  // Stops the server if it is running.
  ~MetricsHttpServer();
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  // Binds host:port (port 0: any free port, see port()) and serves; returns once the
  // listener accepts connections. Errors: INVALID_ARGUMENT for a port outside 0..65535;
  // UNAVAILABLE if the address cannot be bound (port in use, unknown host), with the
  // system's reason; FAILED_PRECONDITION if already started.
  absl::Status Start(const std::string& host, int port);

  // Closes the listener and the connections, and joins the endpoint's threads. A no-op if
  // not started. Start may be called again afterwards.
  void Stop();

  // The bound port while started, else -1.
  int port() const { return port_; }

 private:
  struct Route;
  const std::function<std::string()> render_;
  const std::function<bool()> ready_;
  const MetricsHttpOptions options_;
  MHD_Daemon* daemon_ = nullptr;
  int port_ = -1;
};

}  // namespace grail

#endif  // GRAIL_SERVER_METRICS_METRICS_HTTP_H_
