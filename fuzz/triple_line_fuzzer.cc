// libFuzzer target: the triple-line parser (graph/triple_file.h, common/triple_line.h) on
// arbitrary bytes. A line either fails with a message or yields three fields without a
// separator in them that print back to a line parsing to the same fact.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/triple_line.h"
#include "fuzz/fuzz_check.h"
#include "graph/triple_file.h"
#include "graph/vocabulary.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view line(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<grail::NamedTriple> fact = grail::ParseTripleLine(line);
  const auto fields = grail::SplitTripleFields(line);
  // Messages quote a bounded prefix of a name, however long or odd the line.
  FUZZ_CHECK(grail::QuoteName(line).size() <= 4 * 64 + 64);
  if (!fact.ok()) {
    FUZZ_CHECK(absl::IsInvalidArgument(fact.status()));
    FUZZ_CHECK(!fact.status().message().empty());
    return 0;
  }
  FUZZ_CHECK(fields.ok());  // a parsed line has the shape
  for (const std::string* name : {&fact->head, &fact->relation, &fact->tail}) {
    FUZZ_CHECK(name->find('\t') == std::string::npos);
    FUZZ_CHECK(name->find('\n') == std::string::npos);
    FUZZ_CHECK(grail::ValidateName(*name, "name").ok());  // the store's rule, without a size cap
  }
  absl::StatusOr<grail::NamedTriple> again =
      grail::ParseTripleLine(absl::StrCat(fact->head, "\t", fact->relation, "\t", fact->tail));
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(*again == *fact);
  return 0;
}
