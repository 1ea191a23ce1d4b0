#include "server/metrics/metrics_http.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace grail {
namespace {

constexpr char kTextContentType[] = "text/plain; charset=utf-8";

MHD_Result Respond(MHD_Connection* connection, unsigned int status, const std::string& body,
                   const char* content_type) {
  MHD_Response* response = MHD_create_response_from_buffer(
      body.size(), const_cast<char*>(body.data()), MHD_RESPMEM_MUST_COPY);
  if (response == nullptr) return MHD_NO;
  MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
  const MHD_Result queued = MHD_queue_response(connection, status, response);
  MHD_destroy_response(response);
  return queued;
}

}  // namespace

// libmicrohttpd's request callback, on one of its event-loop threads. GET requests have no
// body, so the first call (headers complete) answers.
struct MetricsHttpServer::Route {
  static MHD_Result Handle(void* self_pointer, MHD_Connection* connection, const char* url,
                           const char* method, const char* /*version*/, const char* /*upload_data*/,
                           size_t* upload_data_size, void** request_state) {
    const auto* self = static_cast<const MetricsHttpServer*>(self_pointer);
    const std::string verb = method;
    if (verb != MHD_HTTP_METHOD_GET && verb != MHD_HTTP_METHOD_HEAD) {
      // The body (if any) is read and dropped, then the request is refused.
      if (*request_state == nullptr) {
        *request_state = connection;  // headers seen
        return MHD_YES;
      }
      if (*upload_data_size != 0) {
        *upload_data_size = 0;
        return MHD_YES;
      }
      return Respond(connection, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET", kTextContentType);
    }
    const std::string path = url;
    if (path == "/metrics") {
      return Respond(connection, MHD_HTTP_OK,
                     self->render_ == nullptr ? std::string() : self->render_(),
                     kExpositionContentType);
    }
    if (path == "/healthz") return Respond(connection, MHD_HTTP_OK, "ok", kTextContentType);
    if (path == "/readyz") {
      if (self->ready_ == nullptr || self->ready_()) {
        return Respond(connection, MHD_HTTP_OK, "ready", kTextContentType);
      }
      return Respond(connection, MHD_HTTP_SERVICE_UNAVAILABLE, "not ready", kTextContentType);
    }
    return Respond(connection, MHD_HTTP_NOT_FOUND, "not found", kTextContentType);
  }
};

MetricsHttpServer::MetricsHttpServer(std::function<std::string()> render,
                                     std::function<bool()> ready, MetricsHttpOptions options)
    : render_(std::move(render)), ready_(std::move(ready)), options_(options) {}

MetricsHttpServer::~MetricsHttpServer() { Stop(); }

absl::Status MetricsHttpServer::Start(const std::string& host, int port) {
  if (daemon_ != nullptr) {
    return absl::FailedPreconditionError("the metrics endpoint is already started");
  }
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("metrics port ", port, " is not in 0..65535"));
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  const int resolved =
      getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &found);
  if (resolved != 0 || found == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", host, ":", port, ": ", gai_strerror(resolved)));
  }
  // The listening socket is ours, so that a failure to bind says why (errno) and so that
  // it has SO_REUSEADDR only, never SO_REUSEPORT: a second process must fail to bind a port
  // in use, not share it.
  const bool ipv6 = found->ai_family == AF_INET6;
  const int listener = socket(found->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int error = listener < 0 ? errno : 0;
  if (listener >= 0) {
    const int yes = 1;
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    if (bind(listener, found->ai_addr, found->ai_addrlen) != 0 || listen(listener, 128) != 0) {
      error = errno;
    }
  }
  freeaddrinfo(found);
  if (error != 0) {
    if (listener >= 0) close(listener);
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", host, ":", port, ": ", std::strerror(error)));
  }

  // No MHD_USE_ERROR_LOG: the library's messages would break the server's JSON log lines.
  daemon_ = MHD_start_daemon(
      MHD_USE_AUTO_INTERNAL_THREAD | (ipv6 ? MHD_USE_IPv6 : 0), 0, nullptr, nullptr, &Route::Handle,
      this, MHD_OPTION_LISTEN_SOCKET, listener, MHD_OPTION_CONNECTION_LIMIT,
      static_cast<unsigned int>(options_.max_connections), MHD_OPTION_PER_IP_CONNECTION_LIMIT,
      static_cast<unsigned int>(options_.max_connections_per_ip), MHD_OPTION_CONNECTION_TIMEOUT,
      static_cast<unsigned int>(options_.idle_timeout_seconds), MHD_OPTION_THREAD_POOL_SIZE,
      static_cast<unsigned int>(options_.threads), MHD_OPTION_END);
  if (daemon_ == nullptr) {
    close(listener);
    return absl::InternalError(
        absl::StrCat("cannot start the metrics endpoint on ", host, ":", port));
  }
  sockaddr_storage bound{};
  socklen_t bound_size = sizeof(bound);
  getsockname(listener, reinterpret_cast<sockaddr*>(&bound), &bound_size);
  port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                            : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  return absl::OkStatus();
}

void MetricsHttpServer::Stop() {
  if (daemon_ == nullptr) return;
  MHD_stop_daemon(daemon_);
  daemon_ = nullptr;
  port_ = -1;
}

}  // namespace grail
