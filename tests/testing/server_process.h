// Starts the real grail-server binary as a child process on loopback ports it picks itself
// (--port 0, --metrics-port 0) and waits until it serves: the server writes --ready-file
// with its ports once the model and the graph are loaded.
#ifndef GRAIL_TESTS_TESTING_SERVER_PROCESS_H_
#define GRAIL_TESTS_TESTING_SERVER_PROCESS_H_

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace grail {

class ServerProcess {
 public:
  ServerProcess() = default;
  ~ServerProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  // Starts build/bin/grail-server with `args` plus the port and ready-file flags, its
  // stderr going to `log_path`. Returns false (with a test failure) if it does not serve
  // within `timeout` or exits first.
  bool Start(const std::vector<std::string>& args, const std::string& log_path,
             std::chrono::seconds timeout = std::chrono::seconds(120)) {
    log_path_ = log_path;
    const std::string ready = log_path + ".ready";
    std::filesystem::remove(ready);
    std::vector<std::string> argv = {std::string(GRAIL_BINARY_DIR) + "/bin/grail-server",
                                     "--host=127.0.0.1", "--port=0", "--metrics-port=0",
                                     "--ready-file=" + ready};
    argv.insert(argv.end(), args.begin(), args.end());
    pid_ = fork();
    if (pid_ == 0) {
      const int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) {
        dup2(fd, STDERR_FILENO);
        dup2(fd, STDOUT_FILENO);
      }
      std::vector<char*> raw;
      for (std::string& a : argv) raw.push_back(a.data());
      raw.push_back(nullptr);
      execv(raw[0], raw.data());
      _exit(127);
    }
    const auto give_up = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < give_up) {
      int status;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        ADD_FAILURE() << "grail-server exited with " << exit_code_ << " before serving:\n" << Log();
        return false;
      }
      // The file appears whole (written aside, then renamed) once the server serves.
      std::ifstream in(ready);
      if (in) {
        const nlohmann::json json = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
        if (json.is_object() && json.contains("port")) {
          port_ = json.at("port").get<int>();
          metrics_port_ = json.at("metrics_port").get<int>();
          return true;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ADD_FAILURE() << "grail-server did not serve within " << timeout.count() << " s:\n" << Log();
    return false;
  }

  // Sends `signal` and waits for the process to exit; returns its exit code (-1 if it was
  // killed by a signal).
  int Stop(int signal = SIGTERM) {
    if (pid_ <= 0) return exit_code_;
    kill(pid_, signal);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return exit_code_;
  }
  // Sends a signal without waiting.
  void Signal(int signal) {
    if (pid_ > 0) kill(pid_, signal);
  }
  // Waits for the process to exit by itself; returns its exit code.
  int Wait() { return Stop(0); }

  std::string target() const { return "127.0.0.1:" + std::to_string(port_); }
  int port() const { return port_; }
  int metrics_port() const { return metrics_port_; }
  pid_t pid() const { return pid_; }
  // What the server logged so far.
  std::string Log() const {
    std::ifstream in(log_path_);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

 private:
  pid_t pid_ = -1;
  int exit_code_ = -1;
  int port_ = 0;
  int metrics_port_ = 0;
  std::string log_path_;
};

}  // namespace grail

#endif  // GRAIL_TESTS_TESTING_SERVER_PROCESS_H_
