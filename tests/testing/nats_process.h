// Real NATS servers (Debian's nats-server) with JetStream, started by the tests on loopback:
// one node, or a cluster of several whose routes connect them. Ports are picked free by
// binding port 0 first; each server's JetStream files go under the test's directory.
#ifndef GRAIL_TESTS_TESTING_NATS_PROCESS_H_
#define GRAIL_TESTS_TESTING_NATS_PROCESS_H_

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/file_text.h"
#include "gtest/gtest.h"

namespace grail {

// A loopback TCP port nobody listens on right now.
inline int FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
  socklen_t length = sizeof address;
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  close(fd);
  return ntohs(address.sin_port);
}

class NatsProcess {
 public:
  NatsProcess() = default;
  ~NatsProcess() { Kill(); }
  NatsProcess(const NatsProcess&) = delete;
  NatsProcess& operator=(const NatsProcess&) = delete;

  // Writes a configuration into `dir` and starts nats-server on it. `routes`: the cluster
  // ports of every node (this one's included) for a cluster, empty for a single node.
  bool Start(const std::string& dir, const std::string& name, int client_port, int cluster_port,
             const std::vector<int>& routes) {
    dir_ = dir;
    port_ = client_port;
    std::ofstream config(dir + "/" + name + ".conf");
    config << "server_name: " << name << "\n"
           << "listen: 127.0.0.1:" << client_port << "\n"
           << "jetstream { store_dir: \"" << dir << "/" << name << "-js\" }\n";
    if (!routes.empty()) {
      std::vector<std::string> urls;
      for (int port : routes) urls.push_back(absl::StrCat("nats://127.0.0.1:", port));
      config << "cluster { name: grail-test\n  listen: 127.0.0.1:" << cluster_port
             << "\n  routes: [" << absl::StrJoin(urls, ", ") << "]\n}\n";
    }
    config.close();
    log_path_ = dir + "/" + name + ".log";
    pid_ = fork();
    if (pid_ == 0) {
      const int fd = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (fd >= 0) {
        dup2(fd, STDERR_FILENO);
        dup2(fd, STDOUT_FILENO);
      }
      const std::string conf = dir + "/" + name + ".conf";
      execlp("nats-server", "nats-server", "-c", conf.c_str(), nullptr);
      _exit(127);
    }
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < give_up) {
      int status;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        ADD_FAILURE() << "nats-server exited before it was ready:\n" << Log();
        return false;
      }
      if (Log().find("Server is ready") != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ADD_FAILURE() << "nats-server was not ready within 30 s:\n" << Log();
    return false;
  }

  void Kill(int signal = SIGKILL) {
    if (pid_ <= 0) return;
    kill(pid_, signal);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

  std::string url() const { return absl::StrCat("nats://127.0.0.1:", port_); }
  std::string Log() const { return ReadFileText(log_path_, "log").value_or(""); }

 private:
  std::string dir_;
  std::string log_path_;
  int port_ = 0;
  pid_t pid_ = -1;
};

// `n` NATS servers: one alone (n == 1), or a cluster whose nodes route to each other.
class NatsCluster {
 public:
  bool Start(const std::string& dir, int n) {
    std::vector<int> client_ports, cluster_ports;
    for (int i = 0; i < n; ++i) {
      client_ports.push_back(FreeLoopbackPort());
      cluster_ports.push_back(FreeLoopbackPort());
    }
    for (int i = 0; i < n; ++i) {
      nodes_.push_back(std::make_unique<NatsProcess>());
      if (!nodes_.back()->Start(dir, absl::StrCat("n", i), client_ports[i], cluster_ports[i],
                                n > 1 ? cluster_ports : std::vector<int>())) {
        return false;
      }
    }
    return true;
  }
  // Every node's client URL, comma-separated (what --nats-url takes).
  std::string urls() const {
    std::vector<std::string> all;
    for (const auto& node : nodes_) all.push_back(node->url());
    return absl::StrJoin(all, ",");
  }
  NatsProcess& node(int i) { return *nodes_[i]; }

 private:
  std::vector<std::unique_ptr<NatsProcess>> nodes_;
};

}  // namespace grail

#endif  // GRAIL_TESTS_TESTING_NATS_PROCESS_H_
