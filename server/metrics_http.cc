#include "server/metrics_http.h"

#include <httplib.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace grail {
namespace {

constexpr char kTextContentType[] = "text/plain; charset=utf-8";

// Scrapes and probes are rare and quick: two workers are plenty, where httplib's default
// would start a thread per core.
constexpr size_t kWorkerThreads = 2;

}  // namespace

MetricsHttpServer::MetricsHttpServer(const MetricsRegistry* registry, std::function<bool()> ready)
    : registry_(registry), ready_(std::move(ready)) {}

MetricsHttpServer::~MetricsHttpServer() { Stop(); }

absl::Status MetricsHttpServer::Start(const std::string& host, int port) {
  if (server_ != nullptr) {
    return absl::FailedPreconditionError("the metrics endpoint is already started");
  }
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("metrics port ", port, " is not in 0..65535"));
  }
  auto server = std::make_unique<httplib::Server>();
  server->new_task_queue = [] { return new httplib::ThreadPool(kWorkerThreads); };
  // SO_REUSEADDR only: httplib's default adds SO_REUSEPORT, which would let a second
  // process bind a port in use instead of failing.
  server->set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  const MetricsRegistry* registry = registry_;
  server->Get("/metrics", [registry](const httplib::Request&, httplib::Response& response) {
    response.set_content(registry->Render(), kExpositionContentType);
  });
  server->Get("/healthz", [](const httplib::Request&, httplib::Response& response) {
    response.set_content("ok", kTextContentType);
  });
  const std::function<bool()>* ready = &ready_;
  server->Get("/readyz", [ready](const httplib::Request&, httplib::Response& response) {
    if (*ready == nullptr || (*ready)()) {
      response.set_content("ready", kTextContentType);
    } else {
      response.status = 503;
      response.set_content("not ready", kTextContentType);
    }
  });

  errno = 0;
  const int bound =
      port == 0 ? server->bind_to_any_port(host) : (server->bind_to_port(host, port) ? port : -1);
  if (bound < 0) {
    const int error = errno;
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", host, ":", port, ": ",
                     error != 0 ? std::strerror(error) : "unknown host or address"));
  }

  // httplib's stop() does nothing until listen_after_bind has marked the server running,
  // so wait for that here: a Stop() right after Start() must still close the listener.
  listener_done_.store(false);
  httplib::Server* raw = server.get();
  thread_ = std::thread([this, raw] {
    raw->listen_after_bind();
    listener_done_.store(true);
  });
  while (!raw->is_running() && !listener_done_.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (listener_done_.load()) {
    thread_.join();
    return absl::InternalError(
        absl::StrCat("the metrics listener on ", host, ":", bound, " stopped at once"));
  }
  server_ = std::move(server);
  port_ = bound;
  return absl::OkStatus();
}

void MetricsHttpServer::Stop() {
  if (server_ == nullptr) return;
  server_->stop();
  thread_.join();
  server_.reset();
  port_ = -1;
}

}  // namespace grail
