// Files that survive a machine crash, not only a process crash: what the trainer and the
// model tools write (archives, checkpoints) reaches the disk before it is named, and a file
// is replaced by a rename, so a reader (a server reloading its model) sees the old file or
// the new one whole, never half of one, and a crash leaves one of them.
#ifndef GRAIL_COMMON_DURABLE_FILE_H_
#define GRAIL_COMMON_DURABLE_FILE_H_

#include <sys/types.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace grail {

// fsync(2)s the file or directory at `path`: its bytes (a directory: its entries) are on the
// disk when this returns OK.
absl::Status SyncPath(const std::string& path);

// The file a write to `path` replaces: `path`, or where it leads if it is a symbolic link
// (a link to the current archive stays a link, and its target gets the new bytes).
std::string ReplacedPath(const std::string& path);

// What a file at `path` is, for a message, when it is not a regular file: "a directory", "a
// FIFO", "a device", "a socket"; empty for a regular file or nothing at all (stat(2): a
// symbolic link is judged by where it leads). The second form reads st_mode of a file already
// opened (fstat(2)), so that what is judged is what was opened.
std::string NonRegularKind(const std::string& path);
std::string NonRegularKind(mode_t mode);

// Whether a tool may write its output file at `path`, checked before any work: refuses
// (INVALID_ARGUMENT, naming `flag`) a path that names something other than a regular file —
// a write replaces the file by a rename, which would put a regular file in place of a device
// or a FIFO — and a path that names the same file as one of `inputs` (flag, path; an empty
// path is skipped), which the write would destroy.
absl::Status CheckOutputPath(
    absl::string_view flag, const std::string& path,
    std::initializer_list<std::pair<absl::string_view, std::string>> inputs = {});

// The file a write to `path` goes into before it replaces `path`: beside it (same directory,
// so the rename is atomic), created under a name no other writer of `path` picks, in any
// process, container or host sharing the directory ("<path>.tmp-<pid>-<random>", created
// exclusively), and held under an exclusive flock(2) for as long as this object lives.
// Creating one also removes the other temporaries of `path` that no writer holds: what a writer
// killed mid-write left behind (a live writer's lock keeps its own; a lock dies with its
// process). A temporary that is never replaced is removed when this object goes. Refused
// (FAILED_PRECONDITION) where `path` names something other than a regular file.
class PendingFile {
 public:
  static absl::StatusOr<PendingFile> Create(const std::string& path);
  PendingFile(PendingFile&& other) noexcept;
  PendingFile& operator=(PendingFile&& other) noexcept;
  ~PendingFile();

  // Where to write.
  const std::string& path() const { return temporary_; }
  // ReplaceFile(path(), target).
  absl::Status Replace(const std::string& target);

 private:
  PendingFile(std::string temporary, int fd) : temporary_(std::move(temporary)), fd_(fd) {}
  void Drop();

  std::string temporary_;
  int fd_ = -1;
  bool replaced_ = false;
};

// Removes the temporaries of `path` that no writer holds locked: its directory's regular files
// named as a writer names them, "<path>.tmp-<pid>-<16 hex>", or an earlier build's
// "<path>.tmp-<pid>" once nothing has written it for an hour (that build's writers took no
// lock); any other "<path>.tmp-*" stays. Returns how many. The hour is counted to
// `file_system_now`, a time (seconds since the epoch) by the clock that stamps the directory's
// mtimes: on a shared file system the server's, not this host's. PendingFile::Create passes the
// mtime of the temporary it has just created and locked; the one-argument form passes this
// host's clock, right for a local file system.
int RemoveAbandonedTemporaries(const std::string& path, int64_t file_system_now);
int RemoveAbandonedTemporaries(const std::string& path);

// Makes `temporary` (written whole) the file at `path`: syncs it, renames it over `path`,
// then syncs their directory so the rename itself lasts. On error `path` is left as it was
// and `temporary` is removed.
absl::Status ReplaceFile(const std::string& temporary, const std::string& path);

// Writes `contents` to `temporary`, then ReplaceFile(temporary, path). On error `path` is left
// as it was and `temporary` is removed.
absl::Status WriteAndReplaceFile(const std::string& temporary, const std::string& path,
                                 absl::string_view contents);
// The same through a PendingFile of `path`: for a file more than one writer may write.
absl::Status WriteAndReplaceFile(const std::string& path, absl::string_view contents);

}  // namespace grail

#endif  // GRAIL_COMMON_DURABLE_FILE_H_
