#include "storage/vocabulary.h"

namespace grail {

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
