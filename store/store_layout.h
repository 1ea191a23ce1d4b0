// The on-disk layout of a TripleStore: RocksDB column families and key encodings.
//
// Shared by the store, its consistency check, the tests that tamper with a store on purpose
// and the ingestion benchmark. The layout itself is described in triple_store.h and
// docs/STORAGE.md; changing anything here requires a new kFormatVersion.
#ifndef GRAIL_STORE_STORE_LAYOUT_H_
#define GRAIL_STORE_STORE_LAYOUT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>

#include "absl/strings/string_view.h"
#include "graph/ids.h"

namespace grail {
namespace store_layout {

// Written when a store is created. Version 2 added the removed_entities family; version 3
// records when each fact was added (facts_out's value and the facts_by_sequence family).
// An older store is upgraded on open (the new families created, the facts it holds indexed
// at sequence 0, the version rewritten), and a store of any other version is not opened.
inline constexpr uint64_t kFormatVersion = 3;
inline constexpr uint64_t kOldestReadableFormatVersion = 1;

// Column families. RocksDB always has "default"; the store leaves it empty.
inline constexpr char kMeta[] = "meta";                          // counter name -> u64
inline constexpr char kEntityByName[] = "entity_by_name";        // name -> u32 id
inline constexpr char kEntityNames[] = "entity_names";           // u32 id -> name
inline constexpr char kRelationByName[] = "relation_by_name";    // name -> u32 id
inline constexpr char kRelationNames[] = "relation_names";       // u32 id -> name
inline constexpr char kFactsOut[] = "facts_out";                 // head|relation|tail -> u64 seq
inline constexpr char kFactsIn[] = "facts_in";                   // tail|relation|head -> ""
inline constexpr char kRemovedEntities[] = "removed_entities";   // u32 id -> "" (version 2)
inline constexpr char kFactsBySequence[] = "facts_by_sequence";  // seq|head|relation|tail ->

// Keys of the meta family. Values are u64, fixed-width big-endian.
inline constexpr char kFormatVersionKey[] = "format_version";
inline constexpr char kEntityCountKey[] = "entities";
inline constexpr char kRelationCountKey[] = "relations";
inline constexpr char kFactCountKey[] = "facts";
inline constexpr char kSequenceKey[] = "sequence";  // chunks committed so far
// Written by the upgrade to version 3: the store's sequence then. Facts added before it
// carry sequence 0 (when they were added was not recorded). Absent: every fact's is known.
inline constexpr char kSequencedFromKey[] = "sequenced_from";

// Fact keys are three ids; the first one is the 4-byte prefix the fact families' prefix
// extractor and bloom filters use, so one entity's adjacency is one prefix scan.
inline constexpr size_t kIdBytes = 4;
inline constexpr size_t kFactKeyBytes = 3 * kIdBytes;

// Big-endian so that RocksDB's bytewise order is numeric order: id-keyed families iterate
// in id order and a fact family iterates sorted by (first, relation, second).
inline std::string EncodeId(uint32_t id) {
  std::string out(kIdBytes, '\0');
  for (size_t i = 0; i < kIdBytes; ++i) out[i] = static_cast<char>(id >> (8 * (3 - i)));
  return out;
}

inline std::optional<uint32_t> DecodeId(absl::string_view bytes) {
  if (bytes.size() != kIdBytes) return std::nullopt;
  uint32_t id = 0;
  for (char c : bytes) id = (id << 8) | static_cast<unsigned char>(c);
  return id;
}

inline std::string EncodeCounter(uint64_t value) {
  std::string out(8, '\0');
  for (size_t i = 0; i < 8; ++i) out[i] = static_cast<char>(value >> (8 * (7 - i)));
  return out;
}

inline std::optional<uint64_t> DecodeCounter(absl::string_view bytes) {
  if (bytes.size() != 8) return std::nullopt;
  uint64_t value = 0;
  for (char c : bytes) value = (value << 8) | static_cast<unsigned char>(c);
  return value;
}

// facts_out key of `t`: head|relation|tail.
inline std::string OutFactKey(const Triple& t) {
  return EncodeId(t.head) + EncodeId(t.relation) + EncodeId(t.tail);
}
// facts_in key of `t`: tail|relation|head.
inline std::string InFactKey(const Triple& t) {
  return EncodeId(t.tail) + EncodeId(t.relation) + EncodeId(t.head);
}

// facts_in's key order (InFactKey's bytes): by tail, relation, head. facts_out's is Triple's
// own operator<.
inline bool InFactKeyLess(const Triple& a, const Triple& b) {
  return std::tie(a.tail, a.relation, a.head) < std::tie(b.tail, b.relation, b.head);
}

// facts_by_sequence key of `t`, added by the chunk of sequence `sequence`: the sequence
// first, so that the family iterates in order of addition and "added after S" is a seek.
inline std::string SequencedFactKey(uint64_t sequence, const Triple& t) {
  return EncodeCounter(sequence) + OutFactKey(t);
}
inline constexpr size_t kSequencedFactKeyBytes = 8 + kFactKeyBytes;

// The sequence a facts_out value records: 8 bytes, or empty for a fact stored before
// version 3 (sequence 0). nullopt for anything else.
inline std::optional<uint64_t> DecodeFactSequence(absl::string_view value) {
  if (value.empty()) return 0;
  return DecodeCounter(value);
}

// Decodes a facts_by_sequence key into its sequence and fact.
struct SequencedFact {
  uint64_t sequence = 0;
  Triple fact;
};
inline std::optional<SequencedFact> DecodeSequencedFactKey(absl::string_view key) {
  if (key.size() != kSequencedFactKeyBytes) return std::nullopt;
  SequencedFact out;
  out.sequence = *DecodeCounter(key.substr(0, 8));
  key.remove_prefix(8);
  out.fact =
      Triple{*DecodeId(key.substr(0, 4)), *DecodeId(key.substr(4, 4)), *DecodeId(key.substr(8, 4))};
  return out;
}

// Decodes a facts_out key; nullopt if it is not kFactKeyBytes long.
inline std::optional<Triple> DecodeOutFactKey(absl::string_view key) {
  if (key.size() != kFactKeyBytes) return std::nullopt;
  return Triple{*DecodeId(key.substr(0, 4)), *DecodeId(key.substr(4, 4)),
                *DecodeId(key.substr(8, 4))};
}
// Decodes a facts_in key back into the fact it mirrors.
inline std::optional<Triple> DecodeInFactKey(absl::string_view key) {
  if (key.size() != kFactKeyBytes) return std::nullopt;
  return Triple{*DecodeId(key.substr(8, 4)), *DecodeId(key.substr(4, 4)),
                *DecodeId(key.substr(0, 4))};
}

}  // namespace store_layout
}  // namespace grail

#endif  // GRAIL_STORE_STORE_LAYOUT_H_
