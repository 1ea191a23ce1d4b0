#include "datasets/wordnet.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace grail {
namespace {

// The four database files, in the order their synsets are read (which fixes which synset
// keeps its NLTK name should two ever compete for one).
enum PosFile : int { kNoun = 0, kVerb = 1, kAdj = 2, kAdv = 3, kNumPosFiles = 4 };
constexpr const char* kPosFileSuffix[kNumPosFiles] = {"noun", "verb", "adj", "adv"};

// Which file holds the synsets of a pointer's or a synset's part-of-speech letter;
// adjective satellites ('s') live in data.adj next to head adjectives ('a').
int PosFileOf(absl::string_view pos) {
  if (pos == "n") return kNoun;
  if (pos == "v") return kVerb;
  if (pos == "a" || pos == "s") return kAdj;
  if (pos == "r") return kAdv;
  return -1;
}

// Relations by index into WordNetRelationNames().
enum Relation : int {
  kHypernym = 0,
  kDerivationallyRelatedForm,
  kMemberMeronym,
  kHasPart,
  kAlsoSee,
  kVerbGroup,
  kSimilarTo,
  kSynsetDomainTopicOf,
  kMemberOfDomainUsage,
  kMemberOfDomainRegion,
  kInstanceHypernym,
};

// The pointer symbol that yields each relation, read in its stored direction: the synset
// whose line carries the pointer is the head. Checked against WN18RR's own files (every one
// of their facts is such a pointer, none needs the reverse). WordNet stores the reflexive
// counterpart of each of these pointers on the target's line (`~` for `@`, `#m` for `%m`,
// `;c` for `-c`, ...), so reading only these symbols loses no fact; `^` (also see) is the
// one that is not always mirrored, and WN18RR keeps its direction too.
int RelationOfPointer(absl::string_view symbol) {
  if (symbol == "@") return kHypernym;
  if (symbol == "@i") return kInstanceHypernym;
  if (symbol == "+") return kDerivationallyRelatedForm;
  if (symbol == "%m") return kMemberMeronym;
  if (symbol == "%p") return kHasPart;
  if (symbol == "^") return kAlsoSee;
  if (symbol == "$") return kVerbGroup;
  if (symbol == "&") return kSimilarTo;
  if (symbol == ";c") return kSynsetDomainTopicOf;
  if (symbol == "-u") return kMemberOfDomainUsage;
  if (symbol == "-r") return kMemberOfDomainRegion;
  return -1;
}

struct Synset {
  int file = 0;
  uint32_t offset = 0;
  char pos = 'n';     // n, v, a, s or r
  std::string lemma;  // first word, lowercased, adjective marker removed
};

// A pointer of a kept type, its target not yet resolved to a synset.
struct PendingPointer {
  uint32_t source = 0;  // index into the synset list
  int relation = 0;
  int target_file = 0;
  uint32_t target_offset = 0;
  int64_t line = 0;  // for error messages
  int file = 0;
};

uint64_t SynsetKey(int file, uint32_t offset) {
  return (static_cast<uint64_t>(file) << 32) | offset;
}

absl::Status LineError(const std::string& path, int64_t line, absl::string_view reason) {
  return absl::InvalidArgumentError(absl::StrCat(path, ":", line, ": ", reason));
}

// Synset offsets are written as exactly 8 decimal digits.
bool ParseOffset(absl::string_view token, uint32_t* offset) {
  if (token.size() != 8) return false;
  for (char c : token) {
    if (c < '0' || c > '9') return false;
  }
  return absl::SimpleAtoi(token, offset);
}

// Calls `on_line(line_number, line)` for every line of `path` that is not blank and not
// part of the license header (lines that begin with two spaces), stopping at the first
// error `on_line` returns.
template <typename OnLine>
absl::Status ForEachDataLine(const std::string& path, OnLine on_line) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  }
  std::string line;
  for (int64_t line_number = 1; std::getline(in, line); ++line_number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || absl::StartsWith(line, "  ")) continue;
    absl::Status status = on_line(line_number, absl::string_view(line));
    if (!status.ok()) return status;
  }
  if (in.bad()) return absl::DataLossError(absl::StrCat("error reading ", path));
  return absl::OkStatus();
}

// index.<pos>: `lemma pos synset_cnt p_cnt [ptr_symbol...] sense_cnt tagsense_cnt
// synset_offset...`, offsets in sense order. Fills lemma -> offsets.
absl::Status ReadIndexFile(const std::string& path,
                           absl::flat_hash_map<std::string, std::vector<uint32_t>>* senses) {
  return ForEachDataLine(path, [&](int64_t line_number, absl::string_view line) {
    std::vector<absl::string_view> tokens = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (tokens.size() < 6) return LineError(path, line_number, "index line has too few fields");
    uint32_t synset_count = 0;
    uint32_t pointer_count = 0;
    if (!absl::SimpleAtoi(tokens[2], &synset_count) || synset_count == 0) {
      return LineError(path, line_number, absl::StrCat("bad synset_cnt '", tokens[2], "'"));
    }
    if (!absl::SimpleAtoi(tokens[3], &pointer_count)) {
      return LineError(path, line_number, absl::StrCat("bad p_cnt '", tokens[3], "'"));
    }
    const size_t expected = 4 + static_cast<size_t>(pointer_count) + 2 + synset_count;
    if (tokens.size() != expected) {
      return LineError(
          path, line_number,
          absl::StrCat("expected ", expected, " fields for ", synset_count, " synsets and ",
                       pointer_count, " pointer types, found ", tokens.size()));
    }
    std::vector<uint32_t>& offsets = (*senses)[tokens[0]];
    if (!offsets.empty()) {
      return LineError(path, line_number, absl::StrCat("lemma '", tokens[0], "' listed twice"));
    }
    offsets.resize(synset_count);
    for (uint32_t i = 0; i < synset_count; ++i) {
      absl::string_view token = tokens[expected - synset_count + i];
      if (!ParseOffset(token, &offsets[i])) {
        return LineError(path, line_number, absl::StrCat("bad synset offset '", token, "'"));
      }
    }
    return absl::OkStatus();
  });
}

// data.<pos>: `synset_offset lex_filenum ss_type w_cnt word lex_id [word lex_id...] p_cnt
// [ptr...] [frames...] | gloss`, w_cnt two hex digits, p_cnt three decimal digits, each
// pointer `symbol offset pos source/target` (source/target four hex digits, 0000 for a
// pointer between synsets, else between two of their words). Frames and gloss are not read.
absl::Status ReadDataFile(const std::string& path, int file, std::vector<Synset>* synsets,
                          std::vector<PendingPointer>* pointers) {
  return ForEachDataLine(path, [&](int64_t line_number, absl::string_view line) {
    // The gloss is free text; only what precedes it is tokenised.
    const size_t bar = line.find(" | ");
    if (bar != absl::string_view::npos) line = line.substr(0, bar);
    std::vector<absl::string_view> tokens = absl::StrSplit(line, ' ', absl::SkipEmpty());
    auto error = [&](absl::string_view reason) { return LineError(path, line_number, reason); };
    if (tokens.size() < 7) return error("synset line has too few fields");

    Synset synset;
    synset.file = file;
    if (!ParseOffset(tokens[0], &synset.offset)) {
      return error(absl::StrCat("bad synset offset '", tokens[0], "'"));
    }
    if (tokens[2].size() != 1 || PosFileOf(tokens[2]) != file) {
      return error(
          absl::StrCat("ss_type '", tokens[2], "' does not belong in data.", kPosFileSuffix[file]));
    }
    synset.pos = tokens[2][0];
    uint32_t word_count = 0;
    if (tokens[3].size() != 2 || !absl::SimpleHexAtoi(tokens[3], &word_count) || word_count == 0) {
      return error(absl::StrCat("bad w_cnt '", tokens[3], "'"));
    }
    size_t next = 4 + 2 * static_cast<size_t>(word_count);
    if (tokens.size() <= next) return error("line ends inside the word list");
    // Adjectives may carry a syntactic marker, e.g. `galore(ip)`; NLTK drops it from names.
    absl::string_view lemma = tokens[4];
    if (!lemma.empty() && lemma.back() == ')') {
      const size_t open = lemma.rfind('(');
      if (open != absl::string_view::npos && open > 0) lemma = lemma.substr(0, open);
    }
    synset.lemma = absl::AsciiStrToLower(lemma);

    uint32_t pointer_count = 0;
    if (!absl::SimpleAtoi(tokens[next], &pointer_count)) {
      return error(absl::StrCat("bad p_cnt '", tokens[next], "'"));
    }
    ++next;
    if (tokens.size() < next + 4 * static_cast<size_t>(pointer_count)) {
      return error(absl::StrCat("line ends inside its ", pointer_count, " pointers"));
    }
    const uint32_t source = static_cast<uint32_t>(synsets->size());
    for (uint32_t i = 0; i < pointer_count; ++i, next += 4) {
      const absl::string_view symbol = tokens[next];
      PendingPointer pointer;
      pointer.source = source;
      pointer.line = line_number;
      pointer.file = file;
      if (!ParseOffset(tokens[next + 1], &pointer.target_offset)) {
        return error(absl::StrCat("bad pointer offset '", tokens[next + 1], "'"));
      }
      pointer.target_file = PosFileOf(tokens[next + 2]);
      if (pointer.target_file < 0) {
        return error(absl::StrCat("bad pointer part of speech '", tokens[next + 2], "'"));
      }
      uint32_t source_target = 0;
      if (tokens[next + 3].size() != 4 || !absl::SimpleHexAtoi(tokens[next + 3], &source_target)) {
        return error(absl::StrCat("bad pointer source/target '", tokens[next + 3], "'"));
      }
      pointer.relation = RelationOfPointer(symbol);
      // A lexical pointer (source/target != 0000) relates two words; its synsets inherit it.
      if (pointer.relation >= 0) pointers->push_back(pointer);
    }
    synsets->push_back(std::move(synset));
    return absl::OkStatus();
  });
}

// NLTK's name: `lemma.pos.NN`, NN the 1-based position of the synset among the senses of
// its first lemma in index.<pos>. A synset whose lemma the index does not list, or whose
// name another synset already took, is named `lemma.pos.OFFSET` instead (8 digits, so it
// cannot meet a sense number); the result is checked to be unique all the same.
absl::StatusOr<std::vector<std::string>> NameSynsets(
    const std::vector<Synset>& synsets,
    const absl::flat_hash_map<std::string, std::vector<uint32_t>> (&senses)[kNumPosFiles]) {
  std::vector<std::string> names;
  names.reserve(synsets.size());
  absl::flat_hash_set<absl::string_view> taken;
  taken.reserve(synsets.size());
  for (const Synset& synset : synsets) {
    std::string name;
    auto it = senses[synset.file].find(synset.lemma);
    if (it != senses[synset.file].end()) {
      auto position = std::find(it->second.begin(), it->second.end(), synset.offset);
      if (position != it->second.end()) {
        name = absl::StrFormat("%s.%c.%02d", synset.lemma, synset.pos,
                               position - it->second.begin() + 1);
      }
    }
    if (name.empty() || taken.contains(name)) {
      name = absl::StrFormat("%s.%c.%08u", synset.lemma, synset.pos, synset.offset);
    }
    names.push_back(std::move(name));
    // Safe to keep views: `names` was reserved, so its strings never move.
    if (!taken.insert(names.back()).second) {
      return absl::InternalError(absl::StrCat("two synsets would both be named ", names.back()));
    }
  }
  return names;
}

}  // namespace

const std::vector<std::string>& WordNetRelationNames() {
  // Indexed by the Relation enum.
  static const std::vector<std::string>* const kNames = new std::vector<std::string>{
      "_hypernym",
      "_derivationally_related_form",
      "_member_meronym",
      "_has_part",
      "_also_see",
      "_verb_group",
      "_similar_to",
      "_synset_domain_topic_of",
      "_member_of_domain_usage",
      "_member_of_domain_region",
      "_instance_hypernym",
  };
  return *kNames;
}

absl::StatusOr<std::vector<NamedTriple>> ConvertWordNet(const std::string& dict_dir) {
  absl::flat_hash_map<std::string, std::vector<uint32_t>> senses[kNumPosFiles];
  std::vector<Synset> synsets;
  std::vector<PendingPointer> pointers;
  std::string data_paths[kNumPosFiles];
  for (int file = 0; file < kNumPosFiles; ++file) {
    const std::string index_path = absl::StrCat(dict_dir, "/index.", kPosFileSuffix[file]);
    absl::Status status = ReadIndexFile(index_path, &senses[file]);
    if (!status.ok()) return status;
    data_paths[file] = absl::StrCat(dict_dir, "/data.", kPosFileSuffix[file]);
    status = ReadDataFile(data_paths[file], file, &synsets, &pointers);
    if (!status.ok()) return status;
  }

  absl::flat_hash_map<uint64_t, uint32_t> synset_at;
  synset_at.reserve(synsets.size());
  for (uint32_t i = 0; i < synsets.size(); ++i) {
    if (!synset_at.emplace(SynsetKey(synsets[i].file, synsets[i].offset), i).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(data_paths[synsets[i].file], ": synset offset ",
                       absl::StrFormat("%08u", synsets[i].offset), " occurs twice"));
    }
  }

  absl::StatusOr<std::vector<std::string>> names = NameSynsets(synsets, senses);
  if (!names.ok()) return names.status();

  std::vector<std::tuple<uint32_t, int, uint32_t>> facts;
  facts.reserve(pointers.size());
  for (const PendingPointer& pointer : pointers) {
    auto target = synset_at.find(SynsetKey(pointer.target_file, pointer.target_offset));
    if (target == synset_at.end()) {
      return LineError(data_paths[pointer.file], pointer.line,
                       absl::StrFormat("pointer to unknown synset %08u in data.%s",
                                       pointer.target_offset, kPosFileSuffix[pointer.target_file]));
    }
    // Lexical pointers between two words of one synset would become self-loops.
    if (target->second == pointer.source) continue;
    facts.emplace_back(pointer.source, pointer.relation, target->second);
  }

  const std::vector<std::string>& relation_names = WordNetRelationNames();
  std::vector<NamedTriple> triples;
  triples.reserve(facts.size());
  for (const auto& [head, relation, tail] : facts) {
    triples.push_back({(*names)[head], relation_names[relation], (*names)[tail]});
  }
  auto key = [](const NamedTriple& t) { return std::tie(t.head, t.relation, t.tail); };
  std::sort(triples.begin(), triples.end(),
            [&](const NamedTriple& a, const NamedTriple& b) { return key(a) < key(b); });
  triples.erase(std::unique(triples.begin(), triples.end()), triples.end());
  return triples;
}

}  // namespace grail
