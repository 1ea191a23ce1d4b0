// Files that survive a machine crash, not only a process crash: what the trainer and the
// model tools write (archives, checkpoints) reaches the disk before it is named, and a file
// is replaced by a rename, so a reader (a server reloading its model) sees the old file or
// the new one whole, never half of one, and a crash leaves one of them.
#ifndef GRAIL_COMMON_DURABLE_FILE_H_
#define GRAIL_COMMON_DURABLE_FILE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace grail {

// fsync(2)s the file or directory at `path`: its bytes (a directory: its entries) are on the
// disk when this returns OK.
absl::Status SyncPath(const std::string& path);

// The file a write to `path` replaces: `path`, or where it leads if it is a symbolic link
// (a link to the current archive stays a link, and its target gets the new bytes).
std::string ReplacedPath(const std::string& path);

// A name beside `path` (same directory, so a rename is atomic) that no other process
// writing `path` at the same time uses: "<path>.tmp-<pid>".
std::string TemporaryPathFor(const std::string& path);

// Makes `temporary` (written whole) the file at `path`: syncs it, renames it over `path`,
// then syncs their directory so the rename itself lasts. On error `path` is left as it was
// and `temporary` is removed.
absl::Status ReplaceFile(const std::string& temporary, const std::string& path);

// Writes `contents` to `temporary`, then ReplaceFile(temporary, path). On error `path` is left
// as it was and `temporary` is removed.
absl::Status WriteAndReplaceFile(const std::string& temporary, const std::string& path,
                                 absl::string_view contents);

}  // namespace grail

#endif  // GRAIL_COMMON_DURABLE_FILE_H_
