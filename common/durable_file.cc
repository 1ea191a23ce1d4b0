#include "common/durable_file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <random>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace grail {

absl::Status SyncPath(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::InternalError(absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  }
  int rc;
  do {
    rc = ::fsync(fd);
  } while (rc != 0 && errno == EINTR);
  const int sync_errno = errno;
  ::close(fd);
  if (rc != 0) {
    return absl::InternalError(absl::StrCat("cannot sync ", path, ": ", std::strerror(sync_errno)));
  }
  return absl::OkStatus();
}

std::string ReplacedPath(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_symlink(path, ec)) return path;
  const std::filesystem::path target = std::filesystem::weakly_canonical(path, ec);
  return ec ? path : target.string();
}

namespace {

bool SameFile(const struct stat& a, const struct stat& b) {
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

int LockFile(int fd, int operation) {
  int rc;
  do {
    rc = ::flock(fd, operation);
  } while (rc != 0 && errno == EINTR);
  return rc;
}

absl::Status WriteContents(const std::string& file, absl::string_view contents) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", file));
  return absl::OkStatus();
}

// A temporary of `path` is named "<path>.tmp-<suffix>". This build's writers use the suffix
// "<pid>-<nonce>", the nonce a uint64 as 16 lowercase hex digits (TemporarySuffix writes it,
// OwnerOfSuffix reads it back); an earlier build's used "<pid>".
constexpr absl::string_view kTemporaryInfix = ".tmp-";
constexpr size_t kNonceDigits = 2 * sizeof(uint64_t);

std::string TemporarySuffix(int64_t pid, uint64_t nonce) {
  static_assert(kNonceDigits == 16, "kZeroPad16 must pad the nonce to kNonceDigits");
  return absl::StrCat(pid, "-", absl::Hex(nonce, absl::kZeroPad16));
}

// Who names a file "<path>.tmp-<suffix>": a writer of this build (locked until its rename), a
// writer of an earlier build (never locked), or nobody (any other file an operator keeps beside
// the path is theirs).
enum class TemporaryOwner { kNone, kLockingWriter, kEarlierWriter };

TemporaryOwner OwnerOfSuffix(absl::string_view suffix) {
  size_t digits = 0;
  while (digits < suffix.size() && absl::ascii_isdigit(suffix[digits])) ++digits;
  if (digits == 0) return TemporaryOwner::kNone;
  if (digits == suffix.size()) return TemporaryOwner::kEarlierWriter;
  const absl::string_view nonce = suffix.substr(digits);
  const bool locking = nonce.size() == 1 + kNonceDigits && nonce[0] == '-' &&
                       std::all_of(nonce.begin() + 1, nonce.end(), [](char c) {
                         return absl::ascii_isxdigit(c) && !absl::ascii_isupper(c);
                       });
  return locking ? TemporaryOwner::kLockingWriter : TemporaryOwner::kNone;
}

// An earlier build's writer holds no lock, so only silence says it is gone: its temporary is
// removed once nothing has written it for this long (a save writes it from start to rename).
constexpr int64_t kEarlierWriterQuietSeconds = 3600;

bool QuietFor(const struct stat& file, int64_t seconds, int64_t file_system_now) {
  return file_system_now - static_cast<int64_t>(file.st_mtime) >= seconds;
}

}  // namespace

int RemoveAbandonedTemporaries(const std::string& path) {
  return RemoveAbandonedTemporaries(path, static_cast<int64_t>(::time(nullptr)));
}

int RemoveAbandonedTemporaries(const std::string& path, int64_t file_system_now) {
  const std::filesystem::path target(path);
  const std::filesystem::path dir =
      target.parent_path().empty() ? std::filesystem::path(".") : target.parent_path();
  const std::string prefix = absl::StrCat(target.filename().string(), kTemporaryInfix);
  int removed = 0;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!absl::StartsWith(name, prefix)) continue;
    const TemporaryOwner owner = OwnerOfSuffix(absl::string_view(name).substr(prefix.size()));
    if (owner == TemporaryOwner::kNone) continue;
    const std::string candidate = it->path().string();
    const int fd = ::open(candidate.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) continue;
    struct stat held, named;
    // Only a regular file whose lock no writer holds (an earlier build's: that nothing has
    // written for an hour), and still under its name.
    if (::fstat(fd, &held) == 0 && S_ISREG(held.st_mode) &&
        (owner == TemporaryOwner::kLockingWriter ||
         QuietFor(held, kEarlierWriterQuietSeconds, file_system_now)) &&
        LockFile(fd, LOCK_EX | LOCK_NB) == 0 && ::lstat(candidate.c_str(), &named) == 0 &&
        SameFile(held, named) && ::unlink(candidate.c_str()) == 0) {
      ++removed;
    }
    ::close(fd);
  }
  return removed;
}

std::string NonRegularKind(mode_t mode) {
  if (S_ISREG(mode)) return "";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

std::string NonRegularKind(const std::string& path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0 ? NonRegularKind(info.st_mode) : "";
}

absl::Status CheckOutputPath(
    absl::string_view flag, const std::string& path,
    std::initializer_list<std::pair<absl::string_view, std::string>> inputs) {
  if (const std::string kind = NonRegularKind(path); !kind.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, " ", path, " is ", kind,
                                                   ", not a regular file; give the path of "
                                                   "a file to write"));
  }
  struct stat out;
  if (::stat(path.c_str(), &out) != 0) return absl::OkStatus();  // a new file
  for (const auto& [input_flag, input] : inputs) {
    struct stat in;
    if (!input.empty() && ::stat(input.c_str(), &in) == 0 && SameFile(out, in)) {
      return absl::InvalidArgumentError(absl::StrCat("--", flag, " ", path, " is the file --",
                                                     input_flag, " reads (", input,
                                                     "); writing it would destroy the input"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<PendingFile> PendingFile::Create(const std::string& path) {
  if (const std::string kind = NonRegularKind(path); !kind.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot write ", path, ": it is ", kind, ", and a write would replace it with a file"));
  }
  std::random_device random;
  for (int attempt = 0; attempt < 16; ++attempt) {
    const uint64_t nonce = (uint64_t{random()} << 32) ^ random();
    std::string temporary = absl::StrCat(path, kTemporaryInfix, TemporarySuffix(::getpid(), nonce));
    const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0) {
      if (errno == EEXIST) continue;
      return absl::InternalError(
          absl::StrCat("cannot create ", temporary, ": ", std::strerror(errno)));
    }
    // A file system without flock(2) fails it for every writer alike: nothing is swept there.
    LockFile(fd, LOCK_EX);
    // Another writer's sweep may have removed the file between its creation and the lock.
    struct stat held, named;
    if (::fstat(fd, &held) == 0 && ::lstat(temporary.c_str(), &named) == 0 &&
        SameFile(held, named)) {
      // Swept with our own temporary held: it is locked, so the sweep keeps it, and its mtime
      // is "now" by the clock that stamped every other temporary here (a shared file system's
      // server's, which this host's may run ahead of).
      RemoveAbandonedTemporaries(path, static_cast<int64_t>(held.st_mtime));
      return PendingFile(std::move(temporary), fd);
    }
    ::close(fd);
  }
  return absl::InternalError(absl::StrCat("cannot create a temporary file beside ", path));
}

PendingFile::PendingFile(PendingFile&& other) noexcept
    : temporary_(std::move(other.temporary_)), fd_(other.fd_), replaced_(other.replaced_) {
  other.fd_ = -1;
  other.replaced_ = true;
}

PendingFile& PendingFile::operator=(PendingFile&& other) noexcept {
  if (this != &other) {
    Drop();
    temporary_ = std::move(other.temporary_);
    fd_ = other.fd_;
    replaced_ = other.replaced_;
    other.fd_ = -1;
    other.replaced_ = true;
  }
  return *this;
}

PendingFile::~PendingFile() { Drop(); }

void PendingFile::Drop() {
  // Removed while still locked, so no sweep can take it for an abandoned one in between.
  if (!replaced_) ::unlink(temporary_.c_str());
  replaced_ = true;
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

absl::Status PendingFile::Replace(const std::string& target) {
  const absl::Status replaced = ReplaceFile(temporary_, target);
  replaced_ = true;  // renamed, or removed by ReplaceFile
  Drop();
  return replaced;
}

absl::Status ReplaceFile(const std::string& temporary, const std::string& path) {
  std::error_code ec;
  absl::Status synced = SyncPath(temporary);
  if (!synced.ok()) {
    std::filesystem::remove(temporary, ec);
    return synced;
  }
  std::filesystem::rename(temporary, path, ec);
  if (ec) {
    std::error_code ignored;
    std::filesystem::remove(temporary, ignored);
    return absl::InternalError(
        absl::StrCat("cannot rename ", temporary, " to ", path, ": ", ec.message()));
  }
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  return SyncPath(dir.empty() ? std::string(".") : dir.string());
}

absl::Status WriteAndReplaceFile(const std::string& temporary, const std::string& path,
                                 absl::string_view contents) {
  const absl::Status written = WriteContents(temporary, contents);
  if (!written.ok()) {
    std::error_code ignored;
    std::filesystem::remove(temporary, ignored);
    return written;
  }
  return ReplaceFile(temporary, path);
}

absl::Status WriteAndReplaceFile(const std::string& path, absl::string_view contents) {
  absl::StatusOr<PendingFile> pending = PendingFile::Create(path);
  if (!pending.ok()) return pending.status();
  const absl::Status written = WriteContents(pending->path(), contents);
  if (!written.ok()) return written;  // the temporary goes with `pending`
  return pending->Replace(path);
}

}  // namespace grail
