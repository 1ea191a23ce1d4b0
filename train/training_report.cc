#include "train/training_report.h"

#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"

namespace grail {

std::string FingerprintFacts(absl::Span<const NamedTriple> facts) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  auto mix = [&hash](absl::string_view s, char end) {
    for (char c : s) hash = (hash ^ static_cast<unsigned char>(c)) * 0x100000001b3ULL;
    hash = (hash ^ static_cast<unsigned char>(end)) * 0x100000001b3ULL;
  };
  for (const NamedTriple& t : facts) {
    mix(t.head, '\t');
    mix(t.relation, '\t');
    mix(t.tail, '\n');
  }
  return absl::StrFormat("fnv1a64:%016x:%d", hash, facts.size());
}

}  // namespace grail
