#include "server/rpc/access_tokens.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/file_text.h"

namespace grail {
namespace {

constexpr size_t kMinTokenBytes = 16;
constexpr size_t kMaxTokenBytes = 4096;
constexpr size_t kMaxNameBytes = 64;

bool ValidToken(absl::string_view token) {
  if (token.size() < kMinTokenBytes || token.size() > kMaxTokenBytes) return false;
  for (char c : token) {
    if (c <= ' ' || c > '~') return false;
  }
  return true;
}

bool ValidName(absl::string_view name) {
  if (name.empty() || name.size() > kMaxNameBytes) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(c) && c != '_' && c != '-' && c != '.') return false;
  }
  return true;
}

absl::Status LineError(size_t line, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("line ", line, ": ", why));
}

}  // namespace

absl::string_view ScopeName(Scope scope) {
  switch (scope) {
    case Scope::kRead:
      return "read";
    case Scope::kWrite:
      return "write";
    case Scope::kAdmin:
      return "admin";
  }
  return "unknown";
}

std::optional<Scope> ParseScope(absl::string_view name) {
  for (Scope s : {Scope::kRead, Scope::kWrite, Scope::kAdmin}) {
    if (name == ScopeName(s)) return s;
  }
  return std::nullopt;
}

TokenDigest DigestToken(absl::string_view token) {
  TokenDigest digest{};
  unsigned int size = 0;
  EVP_Digest(token.data(), token.size(), digest.data(), &size, EVP_sha256(), nullptr);
  return digest;
}

absl::StatusOr<std::vector<TokenEntry>> ParseTokenFile(absl::string_view text) {
  std::vector<TokenEntry> entries;
  absl::flat_hash_set<std::string> digests;
  absl::flat_hash_set<std::string> names;
  size_t number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    const std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipWhitespace());
    if (fields.size() < 2 || fields.size() > 3) {
      return LineError(
          number, absl::StrCat("expected 'TOKEN SCOPE [NAME]', got ", fields.size(), " field(s)"));
    }
    if (!ValidToken(fields[0])) {
      return LineError(number, absl::StrCat("a token is ", kMinTokenBytes, " to ", kMaxTokenBytes,
                                            " printable ASCII characters without spaces"));
    }
    const std::optional<Scope> scope = ParseScope(fields[1]);
    if (!scope.has_value()) {
      return LineError(number,
                       absl::StrCat("unknown scope '", absl::CEscape(fields[1].substr(0, 32)),
                                    "' (read, write or admin)"));
    }
    TokenEntry entry;
    entry.digest = DigestToken(fields[0]);
    entry.scope = *scope;
    const std::string hex = absl::BytesToHexString(
        absl::string_view(reinterpret_cast<const char*>(entry.digest.data()), entry.digest.size()));
    if (fields.size() == 3) {
      if (!ValidName(fields[2])) {
        return LineError(number, absl::StrCat("a name is 1 to ", kMaxNameBytes,
                                              " letters, digits, '_', '-' or '.'"));
      }
      entry.name = std::string(fields[2]);
    } else {
      entry.name = absl::StrCat("sha256-", hex.substr(0, 12));
    }
    if (!digests.insert(hex).second) return LineError(number, "the same token appears twice");
    if (!names.insert(entry.name).second) {
      return LineError(number, absl::StrCat("the name '", entry.name, "' appears twice"));
    }
    entries.push_back(std::move(entry));
  }
  return entries;
}

absl::StatusOr<std::unique_ptr<AccessTokens>> AccessTokens::Open(const std::string& path) {
  std::unique_ptr<AccessTokens> tokens(new AccessTokens(path));
  absl::StatusOr<bool> loaded = tokens->Reload(/*force=*/true);
  if (!loaded.ok()) return loaded.status();
  return tokens;
}

absl::StatusOr<bool> AccessTokens::Reload(bool force) {
  struct stat info;
  if (stat(path_.c_str(), &info) != 0) {
    const int error = errno;
    const std::string message = absl::StrCat("token file ", path_, ": ", std::strerror(error));
    return error == ENOENT   ? absl::NotFoundError(message)
           : error == EACCES ? absl::PermissionDeniedError(message)
                             : absl::InternalError(message);
  }
  FileStamp stamp;
  stamp.inode = info.st_ino;
  stamp.size = info.st_size;
  stamp.mtime_ns = static_cast<int64_t>(info.st_mtim.tv_sec) * 1000000000 + info.st_mtim.tv_nsec;
  if (!force) {
    absl::MutexLock lock(&mu_);
    if (stamp == stamp_) return false;
  }
  absl::StatusOr<std::string> text = ReadFileText(path_, "token file");
  if (!text.ok()) {
    return absl::IsNotFound(text.status())
               ? absl::PermissionDeniedError(absl::StrCat("token file ", path_, ": cannot be read"))
               : text.status();
  }
  absl::StatusOr<std::vector<TokenEntry>> entries = ParseTokenFile(*text);
  if (!entries.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("token file ", path_, ": ", entries.status().message()));
  }
  if (entries->empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("token file ", path_, " holds no tokens: every call would be refused"));
  }
  auto table = std::make_shared<const std::vector<TokenEntry>>(*std::move(entries));
  absl::MutexLock lock(&mu_);
  table_ = std::move(table);
  stamp_ = stamp;
  return true;
}

std::shared_ptr<const std::vector<TokenEntry>> AccessTokens::table() const {
  absl::MutexLock lock(&mu_);
  return table_;
}

AccessDecision AccessTokens::Check(std::optional<absl::string_view> authorization,
                                   Scope needed) const {
  AccessDecision decision;
  if (!authorization.has_value()) {
    decision.status = absl::UnauthenticatedError(
        "this server needs a bearer token: send metadata 'authorization: Bearer TOKEN' "
        "(grail-client --token or GRAIL_TOKEN)");
    decision.outcome = "missing";
    return decision;
  }
  absl::string_view value = absl::StripAsciiWhitespace(*authorization);
  constexpr absl::string_view kScheme = "bearer ";
  if (value.size() <= kScheme.size() ||
      !absl::EqualsIgnoreCase(value.substr(0, kScheme.size()), kScheme)) {
    decision.status =
        absl::UnauthenticatedError("the authorization metadata must read 'Bearer TOKEN'");
    decision.outcome = "malformed";
    return decision;
  }
  const TokenDigest presented =
      DigestToken(absl::StripLeadingAsciiWhitespace(value.substr(kScheme.size())));
  const std::shared_ptr<const std::vector<TokenEntry>> entries = table();
  const TokenEntry* match = nullptr;
  for (const TokenEntry& entry : *entries) {
    // Every entry is compared, whatever matched before: the time taken does not depend on
    // where (or whether) the token is in the file.
    const bool equal = CRYPTO_memcmp(entry.digest.data(), presented.data(), presented.size()) == 0;
    if (equal) match = &entry;
  }
  if (match == nullptr) {
    decision.status = absl::UnauthenticatedError("unknown bearer token");
    decision.outcome = "unknown";
    return decision;
  }
  decision.token_name = match->name;
  if (static_cast<int>(match->scope) < static_cast<int>(needed)) {
    decision.status = absl::PermissionDeniedError(
        absl::StrCat("token '", match->name, "' has scope ", ScopeName(match->scope),
                     "; this call needs ", ScopeName(needed)));
    decision.outcome = "insufficient_scope";
    return decision;
  }
  decision.outcome = "ok";
  return decision;
}

std::vector<std::string> AccessTokens::names() const {
  std::vector<std::string> out;
  for (const TokenEntry& entry : *table()) out.push_back(entry.name);
  return out;
}

}  // namespace grail
