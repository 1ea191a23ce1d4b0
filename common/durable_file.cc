#include "common/durable_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>

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

std::string TemporaryPathFor(const std::string& path) {
  return absl::StrCat(path, ".tmp-", ::getpid());
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
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
    out.close();
    if (!out) {
      std::error_code ignored;
      std::filesystem::remove(temporary, ignored);
      return absl::InternalError(absl::StrCat("cannot write ", temporary));
    }
  }
  return ReplaceFile(temporary, path);
}

}  // namespace grail
