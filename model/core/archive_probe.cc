#include "model/core/archive_probe.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <iterator>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/durable_file.h"
#include "model/core/checkpoint_reader.h"
#include "model/core/model_archive.h"

extern char** environ;

namespace grail {
namespace {

constexpr char kProbeMode[] = "--grail-internal-archive-probe";
// The probe's verdict, its last line: anything else (a sanitizer's report, LibTorch's
// warnings) is only what it said on the way.
constexpr char kVerdictOk[] = "GRAIL-PROBE-VERDICT ok";
constexpr char kVerdictError[] = "GRAIL-PROBE-VERDICT error: ";
constexpr size_t kMaxChildOutput = 4 << 10;  // the tail of what the child says

struct Isolation {
  std::mutex mu;
  bool enabled = false;
  bool cancelled = false;
  ArchiveLoadLimits limits;
  std::set<pid_t> children;
};
Isolation& State() {
  static Isolation* const state = new Isolation;
  return *state;
}
thread_local std::function<bool()> tl_still_wanted;

// Whether CancelArchiveLoads was called: the process is stopping.
bool LoadsCancelled() {
  Isolation& state = State();
  std::lock_guard<std::mutex> lock(state.mu);
  return state.cancelled;
}

std::string ReadAll(int fd) {
  std::string out;
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = read(fd, buffer, sizeof buffer);
    if (n > 0) {
      out.append(buffer, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      return out;
    }
  }
}

bool WriteAll(int fd, absl::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// The probe's own work: the same checks and load the parent is about to do.
absl::Status Probe(absl::string_view kind, absl::string_view bytes, const std::string& path) {
  if (kind == "model") return LoadModelArchiveBytes(bytes, path, torch::kCPU).status();
  if (kind == "checkpoint") return ReadCheckpointTensorsFromBytes(bytes, path).status();
  return absl::InvalidArgumentError(absl::StrCat("unknown probe kind ", kind));
}

// The error as the verdict carries it: escaped onto one line, and short enough that the
// line, escaped (at most 4 bytes a byte), fits the tail of the child's output that is kept.
std::string VerdictMessage(const absl::Status& status) {
  constexpr size_t kMaxMessage = 900;
  absl::string_view message = status.message();
  if (message.size() <= kMaxMessage) return std::string(message);
  return absl::StrCat(message.substr(0, kMaxMessage), " ...");
}

}  // namespace

int RunArchiveProbeIfAsked(int argc, char** argv) {
  if (argc != 4 || std::strcmp(argv[1], kProbeMode) != 0) return -1;
  // The parent's anonymous file on stdin: mapped, so the child holds no copy of the bytes
  // (read whole where it cannot be mapped: empty, or not a file).
  struct stat input;
  std::string read;
  absl::string_view bytes;
  void* mapped = MAP_FAILED;
  if (fstat(STDIN_FILENO, &input) == 0 && S_ISREG(input.st_mode) && input.st_size > 0) {
    mapped =
        mmap(nullptr, static_cast<size_t>(input.st_size), PROT_READ, MAP_SHARED, STDIN_FILENO, 0);
  }
  if (mapped != MAP_FAILED) {
    bytes = absl::string_view(static_cast<const char*>(mapped), static_cast<size_t>(input.st_size));
  } else {
    read = ReadAll(STDIN_FILENO);
    bytes = read;
  }
  const absl::Status status = Probe(argv[2], bytes, argv[3]);
  const std::string verdict =
      status.ok() ? absl::StrCat("\n", kVerdictOk, "\n")
                  : absl::StrCat("\n", kVerdictError, absl::CEscape(VerdictMessage(status)), "\n");
  std::fflush(stdout);
  std::fflush(stderr);
  WriteAll(STDOUT_FILENO, verdict);
  // At once: exit-time work (static destructors, a sanitizer's leak check) is not the
  // load's, and must not change the verdict.
  _exit(status.ok() ? 0 : 1);
}

void IsolateArchiveLoads(const ArchiveLoadLimits& limits) {
  Isolation& state = State();
  std::lock_guard<std::mutex> lock(state.mu);
  state.enabled = true;
  state.limits = limits;
}

void SetArchiveLoadLimits(const ArchiveLoadLimits& limits) {
  Isolation& state = State();
  std::lock_guard<std::mutex> lock(state.mu);
  state.limits = limits;
}

namespace {

constexpr int kGuardedSignals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
char g_guard_line[2048];
size_t g_guard_line_size = 0;
struct sigaction g_guard_previous[std::size(kGuardedSignals)];
stack_t g_guard_previous_stack;
alignas(16) char g_guard_stack[1 << 16];

void OnLoaderCrash(int) {
  ssize_t ignored = write(STDERR_FILENO, g_guard_line, g_guard_line_size);
  (void)ignored;
  _exit(1);
}

}  // namespace

LoaderCrashGuard::LoaderCrashGuard(const std::string& line) {
  g_guard_line_size = std::min(line.size(), sizeof g_guard_line);
  std::memcpy(g_guard_line, line.data(), g_guard_line_size);
  // Its own stack: a stack overflow is one of the crashes it reports.
  stack_t stack{};
  stack.ss_sp = g_guard_stack;
  stack.ss_size = sizeof g_guard_stack;
  sigaltstack(&stack, &g_guard_previous_stack);
  struct sigaction action {};
  action.sa_handler = OnLoaderCrash;
  action.sa_flags = SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  for (size_t i = 0; i < std::size(kGuardedSignals); ++i) {
    sigaction(kGuardedSignals[i], &action, &g_guard_previous[i]);
  }
}

LoaderCrashGuard::~LoaderCrashGuard() {
  for (size_t i = 0; i < std::size(kGuardedSignals); ++i) {
    sigaction(kGuardedSignals[i], &g_guard_previous[i], nullptr);
  }
  sigaltstack(&g_guard_previous_stack, nullptr);
}

ArchiveLoadLimits CurrentArchiveLoadLimits() {
  Isolation& state = State();
  std::lock_guard<std::mutex> lock(state.mu);
  return state.limits;
}

void CancelArchiveLoads() {
  Isolation& state = State();
  std::lock_guard<std::mutex> lock(state.mu);
  state.cancelled = true;
  for (pid_t child : state.children) kill(child, SIGKILL);
}

ArchiveLoadScope::ArchiveLoadScope(std::function<bool()> still_wanted)
    : previous_(std::move(tl_still_wanted)) {
  tl_still_wanted = std::move(still_wanted);
}
ArchiveLoadScope::~ArchiveLoadScope() { tl_still_wanted = std::move(previous_); }

ModelBytes::ModelBytes(ModelBytes&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

ModelBytes& ModelBytes::operator=(ModelBytes&& other) noexcept {
  if (this != &other) {
    Release();
    fd_ = std::exchange(other.fd_, -1);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

ModelBytes::~ModelBytes() { Release(); }

void ModelBytes::Release() {
  if (data_ != nullptr) munmap(data_, size_);
  if (fd_ >= 0) close(fd_);
  data_ = nullptr;
  size_ = 0;
  fd_ = -1;
}

absl::StatusOr<ModelBytes> ReadModelFile(const std::string& path) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; the type is checked on what
  // was opened, so a file swapped for a FIFO after a stat() cannot slip through.
  const int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    return absl::NotFoundError(
        absl::StrCat("cannot open model ", path, ": ", std::strerror(errno)));
  }
  struct FdCloser {
    int fd;
    ~FdCloser() { close(fd); }
  } closer{fd};
  struct stat info;
  if (fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat("model ", path, " is not a regular file (",
                                                   NonRegularKind(info.st_mode),
                                                   "); give the path of a model archive"));
  }
  const int64_t limit = CurrentArchiveLoadLimits().max_bytes;
  if (info.st_size > limit) {
    return absl::InvalidArgumentError(absl::StrCat("model ", path, " is ", info.st_size,
                                                   " bytes; the limit is ", limit,
                                                   " (--max-model-bytes)"));
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  ModelBytes bytes;
  bytes.fd_ = memfd_create("grail-model", MFD_CLOEXEC);
  if (bytes.fd_ < 0) {
    return absl::InternalError(
        absl::StrCat("cannot hold model ", path, ": memfd_create: ", std::strerror(errno)));
  }
  // In steps of 4 MiB, each followed by a look at whether the load is still wanted: 2 GB
  // took 2.4 s past a 1 s deadline when read whole.
  constexpr size_t kStep = size_t{4} << 20;
  std::vector<char> buffer(std::min<size_t>(kStep, static_cast<size_t>(info.st_size) + 1));
  int64_t total = 0;
  for (;;) {
    const ssize_t n = read(fd, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return absl::NotFoundError(
          absl::StrCat("cannot read model ", path, ": ", std::strerror(errno)));
    }
    if (n == 0) break;
    total += n;
    if (total > limit) {  // grew while being read
      return absl::InvalidArgumentError(absl::StrCat(
          "model ", path, " grew past ", limit, " bytes while being read (--max-model-bytes)"));
    }
    if (!WriteAll(bytes.fd_, absl::string_view(buffer.data(), static_cast<size_t>(n)))) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot hold model ", path, ": ", std::strerror(errno)));
    }
    if (LoadsCancelled()) {
      return absl::CancelledError(absl::StrCat("reading model ", path, " stopped after ", total,
                                               " bytes: the process is stopping"));
    }
    if (tl_still_wanted && !tl_still_wanted()) {
      return absl::DeadlineExceededError(
          absl::StrCat("reading model ", path, " stopped after ", total, " of ", info.st_size,
                       " bytes: the caller's deadline passed or it cancelled"));
    }
  }
  if (total > 0) {
    void* data = mmap(nullptr, static_cast<size_t>(total), PROT_READ, MAP_SHARED, bytes.fd_, 0);
    if (data == MAP_FAILED) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot map model ", path, ": ", std::strerror(errno)));
    }
    bytes.data_ = data;
    bytes.size_ = static_cast<size_t>(total);
  }
  return bytes;
}

ByteViewStream::Buffer::Buffer(absl::string_view bytes) {
  char* begin = const_cast<char*>(bytes.data());  // read only: no put area is set
  setg(begin, begin, begin + bytes.size());
}

ByteViewStream::Buffer::pos_type ByteViewStream::Buffer::seekoff(off_type offset,
                                                                 std::ios_base::seekdir from,
                                                                 std::ios_base::openmode which) {
  const off_type size = egptr() - eback();
  const off_type base = from == std::ios_base::beg   ? 0
                        : from == std::ios_base::cur ? gptr() - eback()
                                                     : size;
  const off_type target = base + offset;
  if (!(which & std::ios_base::in) || target < 0 || target > size) return pos_type(off_type(-1));
  setg(eback(), eback() + target, egptr());
  return pos_type(target);
}

ByteViewStream::Buffer::pos_type ByteViewStream::Buffer::seekpos(pos_type position,
                                                                 std::ios_base::openmode which) {
  return seekoff(off_type(position), std::ios_base::beg, which);
}

ByteViewStream::ByteViewStream(absl::string_view bytes) : std::istream(nullptr), buffer_(bytes) {
  rdbuf(&buffer_);
}

absl::Status ProbeInChildProcess(ArchiveKind kind, const ModelBytes& bytes,
                                 const std::string& path) {
  Isolation& state = State();
  ArchiveLoadLimits limits;
  {
    std::lock_guard<std::mutex> lock(state.mu);
    if (!state.enabled) return absl::OkStatus();
    if (state.cancelled) {
      return absl::CancelledError(absl::StrCat("not loading ", path, ": the process is stopping"));
    }
    limits = state.limits;
  }
  // The bytes' anonymous file is the child's stdin: it maps exactly what this process loads,
  // and no copy of them is made for it.
  const int input = bytes.fd();
  int output[2] = {-1, -1};
  if (input < 0 || lseek(input, 0, SEEK_SET) != 0 || pipe2(output, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("cannot start a probe: ", std::strerror(errno)));
  }
  auto close_all = [&] {
    if (output[0] >= 0) close(output[0]);
    if (output[1] >= 0) close(output[1]);
  };
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, input, STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, output[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, output[1], STDERR_FILENO);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attributes, &none);  // the server blocks its signals
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK);
  const std::string kind_name = kind == ArchiveKind::kModel ? "model" : "checkpoint";
  std::string self = "/proc/self/exe";
  char* argv[] = {self.data(), const_cast<char*>(kProbeMode), const_cast<char*>(kind_name.c_str()),
                  const_cast<char*>(path.c_str()), nullptr};
  pid_t child = -1;
  int spawned;
  {
    std::lock_guard<std::mutex> lock(state.mu);
    spawned = state.cancelled
                  ? ECANCELED
                  : posix_spawn(&child, self.c_str(), &actions, &attributes, argv, environ);
    if (spawned == 0) state.children.insert(child);
  }
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  close(output[1]);
  output[1] = -1;
  if (spawned != 0) {
    close_all();
    if (spawned == ECANCELED) {
      return absl::CancelledError(absl::StrCat("not loading ", path, ": the process is stopping"));
    }
    return absl::InternalError(absl::StrCat("cannot start a probe: ", std::strerror(spawned)));
  }

  // Wait for the verdict, reading what the child writes (its error; LibTorch's warnings)
  // so that it never blocks on a full pipe, and give up at the time bound, on cancellation,
  // or when the caller has gone.
  const auto deadline = std::chrono::steady_clock::now() + limits.timeout;
  std::string said;
  absl::Status stopped;
  int wstatus = 0;
  for (;;) {
    pollfd fd{output[0], POLLIN, 0};
    if (poll(&fd, 1, 50) > 0) {
      char buffer[4096];
      const ssize_t n = read(output[0], buffer, sizeof buffer);
      if (n > 0) {
        said.append(buffer, static_cast<size_t>(n));
        if (said.size() > kMaxChildOutput) said.erase(0, said.size() - kMaxChildOutput);
      }
    }
    const pid_t done = waitpid(child, &wstatus, WNOHANG);
    if (done == child) break;
    if (LoadsCancelled()) {
      stopped =
          absl::CancelledError(absl::StrCat("loading ", path, " stopped: the process is stopping"));
    } else if (std::chrono::steady_clock::now() > deadline) {
      stopped = absl::DeadlineExceededError(
          absl::StrCat("loading ", path, " took longer than ", limits.timeout.count(),
                       " s (--model-load-timeout-seconds); the previous model keeps serving"));
    } else if (tl_still_wanted && !tl_still_wanted()) {
      stopped = absl::DeadlineExceededError(
          absl::StrCat("loading ", path, " stopped: the caller's deadline passed or it cancelled"));
    }
    if (!stopped.ok()) {
      kill(child, SIGKILL);
      while (waitpid(child, &wstatus, 0) < 0 && errno == EINTR) {
      }
      break;
    }
  }
  {
    std::lock_guard<std::mutex> lock(state.mu);
    state.children.erase(child);
    // Killed by CancelArchiveLoads between two looks: not a crash.
    if (stopped.ok() && state.cancelled && WIFSIGNALED(wstatus)) {
      stopped =
          absl::CancelledError(absl::StrCat("loading ", path, " stopped: the process is stopping"));
    }
  }
  close_all();
  if (!stopped.ok()) return stopped;
  // The verdict line decides; a child that ended without one crashed.
  const size_t verdict = said.rfind("GRAIL-PROBE-VERDICT ");
  if (verdict != std::string::npos) {
    absl::string_view line = absl::string_view(said).substr(verdict);
    line = line.substr(0, line.find('\n'));
    if (line == kVerdictOk) return absl::OkStatus();
    // The message escaped to stay on its line (LibTorch's run over several).
    std::string message;
    if (absl::ConsumePrefix(&line, kVerdictError) && absl::CUnescape(line, &message)) {
      return absl::InvalidArgumentError(message);
    }
  }
  const std::string how =
      WIFSIGNALED(wstatus)
          ? absl::StrCat("signal ", WTERMSIG(wstatus), ", ", strsignal(WTERMSIG(wstatus)))
          : absl::StrCat("exit status ", WEXITSTATUS(wstatus), " without a verdict");
  return absl::InvalidArgumentError(absl::StrCat(
      "loading model ", path, " crashed LibTorch's loader (", how,
      ", in a child process; nothing here was affected): the file is damaged or not a model "
      "archive"));
}

}  // namespace grail
