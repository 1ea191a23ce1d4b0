// How model files from outside are read: bounded, and loaded once in a child process before
// this process trusts them.
//
// LibTorch's deserializer is not hardened: a damaged archive can crash the process that
// loads it (SIGSEGV inside torch::jit::load, docs/RELIABILITY.md). model/core/archive_check.h
// refuses what it can see before LibTorch reads a byte (zip structure, CRC-32s, every tensor
// record against its storage's declared size); what is left is run first in a child: the
// program starts itself again (/proc/self/exe) in probe mode, hands it the same bytes it
// will load on a pipe, and waits, with a time bound, for its verdict. A crash there becomes
// an error here; the server keeps serving.
//
// Which programs isolate: those whose main calls IsolateArchiveLoads (the server once it
// serves, grail-eval, grail-tools). Elsewhere (the trainers, tests) loads run in-process. A
// program's first load, before it serves anything, can be guarded more cheaply: under a
// LoaderCrashGuard a crash ends the process with a clear message instead of a bare SIGSEGV
// (a child probe would add a LibTorch start-up, about a second, to every server start).
//
// Thread safety: every function may be called from any thread.
#ifndef GRAIL_MODEL_CORE_ARCHIVE_PROBE_H_
#define GRAIL_MODEL_CORE_ARCHIVE_PROBE_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <istream>
#include <streambuf>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace grail {

struct ArchiveLoadLimits {
  // Larger files are refused before being read (grail-server's --max-model-bytes).
  int64_t max_bytes = int64_t{1} << 30;
  // A child that has not answered by then is killed and the load fails.
  std::chrono::seconds timeout{300};
};

// What the child process is asked to read.
enum class ArchiveKind { kModel, kCheckpoint };

// In main(), before anything else: if this process was started as a probe (argv names the
// probe mode), does the probe and returns the process's exit code; otherwise returns -1 and
// the program goes on.
int RunArchiveProbeIfAsked(int argc, char** argv);

// From now on, archives are loaded in a child process first (see above), under `limits`.
void IsolateArchiveLoads(const ArchiveLoadLimits& limits);
// The limits alone (ReadModelFile's size bound), loads staying in-process.
void SetArchiveLoadLimits(const ArchiveLoadLimits& limits);
ArchiveLoadLimits CurrentArchiveLoadLimits();

// While an instance lives, a crash of the process (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT;
// a stack overflow included: the handler runs on its own stack) writes `line` to stderr and
// exits with status 1. For a load that runs in-process while the program serves nothing yet.
// One instance at a time; the previous handlers are restored on destruction.
class LoaderCrashGuard {
 public:
  explicit LoaderCrashGuard(const std::string& line);
  ~LoaderCrashGuard();
  LoaderCrashGuard(const LoaderCrashGuard&) = delete;
  LoaderCrashGuard& operator=(const LoaderCrashGuard&) = delete;
};

// Kills every probe in progress and makes later loads fail with CANCELLED: the process is
// shutting down and must not wait for a load.
void CancelArchiveLoads();

// While an instance lives, loads on this thread stop (DEADLINE_EXCEEDED) as soon as
// `still_wanted` returns false: a reload whose caller has gone stops early.
class ArchiveLoadScope {
 public:
  explicit ArchiveLoadScope(std::function<bool()> still_wanted);
  ~ArchiveLoadScope();
  ArchiveLoadScope(const ArchiveLoadScope&) = delete;
  ArchiveLoadScope& operator=(const ArchiveLoadScope&) = delete;

 private:
  std::function<bool()> previous_;
};

// A model file's bytes, held once: read into an anonymous file (memfd) that this process
// maps read-only and a probe child maps too, so neither holds a copy of its own.
class ModelBytes {
 public:
  ModelBytes() = default;
  ModelBytes(ModelBytes&& other) noexcept;
  ModelBytes& operator=(ModelBytes&& other) noexcept;
  ~ModelBytes();

  absl::string_view view() const {
    return absl::string_view(static_cast<const char*>(data_), size_);
  }
  // The anonymous file (-1 for an empty one), for a child to map.
  int fd() const { return fd_; }

 private:
  friend absl::StatusOr<ModelBytes> ReadModelFile(const std::string& path);
  void Release();

  int fd_ = -1;
  void* data_ = nullptr;
  size_t size_ = 0;
};

// The bytes of the model file at `path`: a regular file (a FIFO, a device or a directory
// would block or never end) no larger than the limits' max_bytes, refused before a byte is
// read when it is larger (INVALID_ARGUMENT naming --max-model-bytes). Read in steps that
// stop as soon as the ArchiveLoadScope's caller has gone (DEADLINE_EXCEEDED) or the process
// stops (CANCELLED), so a large file's read does not outlive its caller. INVALID_ARGUMENT
// naming what the path is, NOT_FOUND if it cannot be opened.
absl::StatusOr<ModelBytes> ReadModelFile(const std::string& path);

// Loads `bytes` (the file at `path`) in a child process as `kind`, if loads are isolated;
// OK at once otherwise. The child maps the same anonymous file. The child's error, or
// INVALID_ARGUMENT "loading PATH crashed the loader (signal N)", DEADLINE_EXCEEDED (the time
// bound, or the scope's caller gone), CANCELLED (CancelArchiveLoads).
absl::Status ProbeInChildProcess(ArchiveKind kind, const ModelBytes& bytes,
                                 const std::string& path);

// An std::istream over bytes held elsewhere, without the copy std::istringstream makes: what
// LibTorch's readers are handed.
class ByteViewStream : public std::istream {
 public:
  explicit ByteViewStream(absl::string_view bytes);

 private:
  class Buffer : public std::streambuf {
   public:
    explicit Buffer(absl::string_view bytes);

   protected:
    pos_type seekoff(off_type offset, std::ios_base::seekdir from,
                     std::ios_base::openmode which) override;
    pos_type seekpos(pos_type position, std::ios_base::openmode which) override;
  };
  Buffer buffer_;
};

}  // namespace grail

#endif  // GRAIL_MODEL_CORE_ARCHIVE_PROBE_H_
