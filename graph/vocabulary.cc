#include "graph/vocabulary.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace grail {

std::string QuoteName(absl::string_view name, size_t max_bytes) {
  if (name.size() <= max_bytes) return absl::StrCat("\"", absl::CHexEscape(name), "\"");
  return absl::StrCat("\"", absl::CHexEscape(name.substr(0, max_bytes)), "...\" (", name.size(),
                      " bytes)");
}

absl::Status ValidateName(absl::string_view name, absl::string_view what, size_t max_bytes,
                          absl::string_view limit_flag) {
  if (name.empty()) return absl::InvalidArgumentError(absl::StrCat(what, " is empty"));
  if (name.size() > max_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " is ", name.size(), " bytes; the limit is ", max_bytes,
                     limit_flag.empty() ? "" : absl::StrCat(" (", limit_flag, ")")));
  }
  const size_t bad = name.find_first_of("\t\r\n");
  if (bad != absl::string_view::npos) {
    const char* character = name[bad] == '\t'   ? "a TAB"
                            : name[bad] == '\r' ? "a carriage return"
                                                : "a line feed";
    return absl::InvalidArgumentError(
        absl::StrCat(what, " contains ", character, " at byte ", bad));
  }
  return absl::OkStatus();
}

Vocabulary::Vocabulary(const std::vector<std::string>& names) {
  for (const std::string& name : names) Intern(name);
}

uint32_t Vocabulary::Intern(absl::string_view name) {
  auto [it, inserted] = ids_.try_emplace(name, size());
  if (inserted) names_.emplace_back(name);
  return it->second;
}

std::optional<uint32_t> Vocabulary::Find(absl::string_view name) const {
  auto it = ids_.find(name);
  if (it == ids_.end()) return std::nullopt;
  return it->second;
}

}  // namespace grail
