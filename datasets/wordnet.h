// The embedded default data set: WordNet 3.0 (Debian package `wordnet-base`) as triples.
//
// WN18RR was cut from WordNet; we rebuild the same kind of graph from the source so the
// product runs end to end with no download. Every synset is an entity; every synset
// pointer (and every lexical pointer, lifted to the synsets of its two words) whose type is
// one of WN18RR's 11 relations becomes a fact named with WN18RR's relation name.
#ifndef GRAIL_DATASETS_WORDNET_H_
#define GRAIL_DATASETS_WORDNET_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/triple_file.h"

namespace grail {

// Where `wordnet-base` installs the database files.
inline constexpr char kDefaultWordNetDir[] = "/usr/share/wordnet";

// WN18RR's relation names, in a fixed order.
const std::vector<std::string>& WordNetRelationNames();

// Reads data.{noun,verb,adj,adv} and index.{noun,verb,adj,adv} from `dict_dir` and returns
// the facts, sorted and without duplicates or self-loops. Entities are named like NLTK
// names synsets (`dog.n.01`: first lemma, part of speech, sense number of that lemma), so
// rankings read as words. Errors name the file and line that could not be parsed.
absl::StatusOr<std::vector<NamedTriple>> ConvertWordNet(const std::string& dict_dir);

}  // namespace grail

#endif  // GRAIL_DATASETS_WORDNET_H_
