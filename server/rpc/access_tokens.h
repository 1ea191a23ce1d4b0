// Bearer tokens with scopes, read from a file the operator owns (--auth-tokens FILE).
//
// The file has one token per line:
//   TOKEN SCOPE [NAME]
// SCOPE is read, write or admin (read ⊂ write ⊂ admin). NAME (letters, digits, '_', '-', '.';
// at most 64) is what logs and /metrics show; without it the token is named by the first 12
// hex digits of its SHA-256. Blank lines and lines starting with '#' are ignored. A token is
// 16 to 4096 printable ASCII characters without spaces. Errors name the line, never a token.
//
// Only SHA-256 digests of the tokens are kept. A presented token is hashed and compared with
// every digest in constant time (CRYPTO_memcmp, no early exit), so neither the time taken
// nor the order of the file tells an attacker how close a guess was.
//
// Thread safety: Check and the accessors may run concurrently with each other and with
// Reload (the table is swapped atomically under a mutex held only for the pointer copy).
#ifndef GRAIL_SERVER_RPC_ACCESS_TOKENS_H_
#define GRAIL_SERVER_RPC_ACCESS_TOKENS_H_

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace grail {

enum class Scope { kRead = 0, kWrite = 1, kAdmin = 2 };

absl::string_view ScopeName(Scope scope);
std::optional<Scope> ParseScope(absl::string_view name);

using TokenDigest = std::array<unsigned char, 32>;  // SHA-256

TokenDigest DigestToken(absl::string_view token);

struct TokenEntry {
  TokenDigest digest;
  Scope scope;
  std::string name;
};

// The parsed lines of a token file. INVALID_ARGUMENT names the first bad line (and why:
// a missing or unknown scope, a short token, a bad name, a duplicate token or name).
absl::StatusOr<std::vector<TokenEntry>> ParseTokenFile(absl::string_view text);

// The outcome of checking one call's credentials.
struct AccessDecision {
  // OK, UNAUTHENTICATED (no token, a malformed header or an unknown token) or
  // PERMISSION_DENIED (a known token whose scope is too small); the message says which and
  // never quotes the token.
  absl::Status status;
  std::string token_name;  // set when the token is known
  // For metrics: "ok", "missing", "malformed", "unknown" or "insufficient_scope".
  absl::string_view outcome;
};

class AccessTokens {
 public:
  // Reads and parses `path`. Errors: NOT_FOUND / PERMISSION_DENIED / INTERNAL from reading,
  // INVALID_ARGUMENT from parsing (prefixed with the path); FAILED_PRECONDITION for a file
  // without tokens (it would refuse every call).
  static absl::StatusOr<std::unique_ptr<AccessTokens>> Open(const std::string& path);

  // Re-reads the file if its modification time, size or inode changed since the last read
  // (or always, with force). Returns whether a new table is in use. On any error the tokens
  // in use stay as they were and the error is returned.
  absl::StatusOr<bool> Reload(bool force);

  // Checks the value of a call's "authorization" metadata (nullopt: none sent), which must
  // be "Bearer TOKEN", against the scope the call needs.
  AccessDecision Check(std::optional<absl::string_view> authorization, Scope needed) const;

  // The names of the tokens in use, in file order.
  std::vector<std::string> names() const;
  const std::string& path() const { return path_; }

 private:
  struct FileStamp {
    ino_t inode = 0;
    int64_t size = -1;
    int64_t mtime_ns = -1;
    bool operator==(const FileStamp& o) const {
      return inode == o.inode && size == o.size && mtime_ns == o.mtime_ns;
    }
  };
  explicit AccessTokens(std::string path) : path_(std::move(path)) {}
  std::shared_ptr<const std::vector<TokenEntry>> table() const;

  const std::string path_;
  mutable absl::Mutex mu_;
  std::shared_ptr<const std::vector<TokenEntry>> table_ ABSL_GUARDED_BY(mu_);
  FileStamp stamp_ ABSL_GUARDED_BY(mu_);
};

}  // namespace grail

#endif  // GRAIL_SERVER_RPC_ACCESS_TOKENS_H_
