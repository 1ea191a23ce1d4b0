#include "storage/vocabulary.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace grail {

std::string QuoteName(absl::string_view name, size_t max_bytes) {
  if (name.size() <= max_bytes) return absl::StrCat("\"", absl::CHexEscape(name), "\"");
  return absl::StrCat("\"", absl::CHexEscape(name.substr(0, max_bytes)), "...\" (", name.size(),
                      " bytes)");
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
