#include "model/grail/grail_model.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "graph/static_graph.h"
#include "graph/triple_file.h"
#include "gtest/gtest.h"
#include "model/core/archive_check.h"
#include "model/grail/enclosing_subgraph.h"
#include "model/grail/subgraph_batch.h"
#include "tests/testing/archive_surgery.h"
#include "tests/testing/temp_dir.h"

namespace grail {
namespace {

using ::testing::HasSubstr;

// A small graph with three relations and a handful of queries over it.
class GrailModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    IndexTriples({{"a", "p", "b"},
                  {"b", "q", "c"},
                  {"a", "r", "c"},
                  {"c", "p", "d"},
                  {"d", "q", "a"},
                  {"b", "r", "d"},
                  {"e", "p", "a"},
                  {"e", "q", "d"}},
                 &indexed_);
    graph_ = StaticGraph(indexed_.entities.size(), indexed_.triples);
  }

  EnclosingSubgraph Extract(const std::string& h, const std::string& r, const std::string& t,
                            const GrailConfig& config = {}) {
    SubgraphExtractor extractor(config.extraction());
    EnclosingSubgraph s;
    EXPECT_TRUE(extractor
                    .Extract(graph_, *indexed_.entities.Find(h), *indexed_.relations.Find(r),
                             *indexed_.entities.Find(t), false, &s)
                    .ok());
    return s;
  }

  // Queries (h, r, t) as one batch.
  SubgraphBatch Batch(const std::vector<NamedTriple>& queries, const GrailConfig& config = {}) {
    SubgraphBatch batch;
    for (const NamedTriple& q : queries) {
      batch.Add(Extract(q.head, q.relation, q.tail, config), *indexed_.relations.Find(q.relation),
                {});
    }
    return batch;
  }

  std::unique_ptr<GrailModel> NewModel(const GrailConfig& config = {}, uint64_t seed = 1) {
    absl::StatusOr<std::unique_ptr<GrailModel>> model =
        GrailModel::Create(config, indexed_.relations.names(), seed);
    EXPECT_TRUE(model.ok()) << model.status();
    return model.ok() ? *std::move(model) : nullptr;
  }

  std::string TempPath(const std::string& name) { return ProcessTempPath(name); }

  // The bytes of a small model's archive as GrailModel::Save writes it.
  std::string SavedArchiveBytes() {
    GrailConfig config;
    config.dim = 8;
    const std::string saved = TempPath("model.pt");
    EXPECT_TRUE(NewModel(config)->Save(saved).ok());
    return ReadTextFile(saved);
  }

  IndexedTriples indexed_;
  StaticGraph graph_;
  const std::vector<NamedTriple> queries_ = {
      {"a", "p", "c"}, {"b", "q", "a"}, {"e", "r", "c"}, {"a", "p", "b"}, {"d", "r", "e"}};
};

TEST_F(GrailModelTest, ScoresOneFiniteValuePerSubgraph) {
  std::unique_ptr<GrailModel> model = NewModel();
  ASSERT_NE(model, nullptr);
  absl::StatusOr<std::vector<float>> scores = model->Score(Batch(queries_));
  ASSERT_TRUE(scores.ok()) << scores.status();
  ASSERT_EQ(scores->size(), queries_.size());
  for (float s : *scores) EXPECT_TRUE(std::isfinite(s));
  EXPECT_NE((*scores)[0], (*scores)[1]);
}

TEST_F(GrailModelTest, BatchedScoresEqualScoresOfEachSubgraphAlone) {
  std::unique_ptr<GrailModel> model = NewModel();
  absl::StatusOr<std::vector<float>> together = model->Score(Batch(queries_));
  ASSERT_TRUE(together.ok());
  for (size_t i = 0; i < queries_.size(); ++i) {
    absl::StatusOr<std::vector<float>> alone = model->Score(Batch({queries_[i]}));
    ASSERT_TRUE(alone.ok());
    EXPECT_NEAR((*together)[i], (*alone)[0], 1e-5 * (1 + std::abs((*alone)[0]))) << i;
  }
}

TEST_F(GrailModelTest, TheNarrowFirstLayerComputesWhatThePlainFormDoes) {
  // Layer 0 reads 2(k+1) = 8 label features into dim 32: the narrow form applies.
  for (bool attention : {true, false}) {
    GrailConfig narrow;
    narrow.attention = attention;
    ASSERT_LT(narrow.label_dim(), narrow.dim);
    GrailConfig plain = narrow;
    plain.narrow_input_layers = false;
    const SubgraphBatch batch = Batch(queries_);
    // Same seed, same parameters: only the order of the layer's products differs.
    absl::StatusOr<std::vector<float>> a = NewModel(narrow, 5)->Score(batch);
    absl::StatusOr<std::vector<float>> b = NewModel(plain, 5)->Score(batch);
    ASSERT_TRUE(a.ok() && b.ok());
    for (size_t i = 0; i < a->size(); ++i) {
      EXPECT_NEAR((*a)[i], (*b)[i], 1e-5 * (1 + std::abs((*b)[i])))
          << "query " << i << " attention " << attention;
    }
    // A different model does differ: the comparison can fail.
    EXPECT_NE((*NewModel(plain, 6)->Score(batch))[0], (*b)[0]);
  }
}

TEST_F(GrailModelTest, SameSeedGivesSameParametersAndOtherSeedDoesNot) {
  const SubgraphBatch batch = Batch(queries_);
  std::vector<float> a = *NewModel({}, 7)->Score(batch);
  std::vector<float> b = *NewModel({}, 7)->Score(batch);
  std::vector<float> c = *NewModel({}, 8)->Score(batch);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST_F(GrailModelTest, SavedArchiveScoresExactlyLikeTheModelAndKeepsItsMetadata) {
  GrailConfig config;
  config.hops = 2;
  config.max_nodes_per_hop = 17;
  config.num_layers = 2;
  std::unique_ptr<GrailModel> model = NewModel(config);
  model->set_training_fingerprint("fnv1a:1234");
  const std::string path = TempPath("roundtrip.pt");
  ASSERT_TRUE(model->Save(path).ok());

  absl::StatusOr<std::unique_ptr<GrailModel>> loaded = GrailModel::Load(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ((*loaded)->relations(), indexed_.relations.names());
  EXPECT_EQ((*loaded)->config().hops, 2);
  EXPECT_EQ((*loaded)->config().max_nodes_per_hop, 17);
  EXPECT_EQ((*loaded)->config().num_layers, 2);
  EXPECT_TRUE((*loaded)->config().attention);
  EXPECT_EQ((*loaded)->training_fingerprint(), "fnv1a:1234");
  EXPECT_EQ((*loaded)->num_parameters(), model->num_parameters());
  const SubgraphBatch batch = Batch(queries_, config);
  EXPECT_EQ(*(*loaded)->Score(batch), *model->Score(batch));
}

// A server reloads its model from the path the trainer saves to: a reader meanwhile reads the
// archive before a save or after it, whole, never a file the save is still writing, and the
// saves leave no temporary file behind.
TEST_F(GrailModelTest, AReaderMeanwhileSeesTheOldArchiveOrTheNewOneNeverHalfOfOne) {
  GrailConfig config;
  config.dim = 256;  // an archive of a few MB, long enough to write to be read midway
  std::unique_ptr<GrailModel> models[] = {NewModel(config, 1), NewModel(config, 2)};
  const std::string path = TempPath("swapped.pt");
  ASSERT_TRUE(models[0]->Save(path).ok());
  std::atomic<bool> saving{true};
  int reads = 0, damaged = 0;
  std::string first_damage;
  std::thread reader([&] {
    do {
      const std::string bytes = ReadTextFile(path);
      const absl::Status status = CheckModelArchiveBytes(bytes, path);
      ++reads;
      if (!status.ok() && damaged++ == 0) first_damage = status.ToString();
    } while (saving.load());
  });
  for (int i = 1; i <= 40; ++i) EXPECT_TRUE(models[i % 2]->Save(path).ok());
  saving.store(false);
  reader.join();
  EXPECT_EQ(damaged, 0) << "of " << reads << " reads; the first: " << first_damage;
  int others = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::filesystem::path(path).parent_path())) {
    if (absl::StartsWith(entry.path().filename().string(), "swapped.pt.")) ++others;
  }
  EXPECT_EQ(others, 0);
}

TEST_F(GrailModelTest, AblationsAreCarriedByTheArchive) {
  GrailConfig config;
  config.attention = false;
  config.node_labels = false;
  config.enclosing = false;
  std::unique_ptr<GrailModel> model = NewModel(config);
  EXPECT_LT(model->num_parameters(), NewModel()->num_parameters());
  const std::string path = TempPath("ablation.pt");
  ASSERT_TRUE(model->Save(path).ok());
  std::unique_ptr<GrailModel> loaded = *GrailModel::Load(path);
  EXPECT_FALSE(loaded->config().attention);
  EXPECT_FALSE(loaded->config().node_labels);
  EXPECT_FALSE(loaded->config().enclosing);
  EXPECT_FALSE(loaded->config().zero_without_in_edges);
  const SubgraphBatch batch = Batch(queries_, config);
  EXPECT_EQ(*loaded->Score(batch), *model->Score(batch));
}

TEST_F(GrailModelTest, ConstantLabelsIgnoreDistances) {
  GrailConfig config;
  config.node_labels = false;
  std::unique_ptr<GrailModel> model = NewModel(config);
  SubgraphBatch batch = Batch({queries_[0]});
  SubgraphBatch relabelled = batch;
  for (int64_t& d : relabelled.dist_u) d = 2;
  EXPECT_EQ(*model->Score(batch), *model->Score(relabelled));
  std::unique_ptr<GrailModel> labelled = NewModel();
  EXPECT_NE(*labelled->Score(batch), *labelled->Score(relabelled));
}

// A node with no edge at all, appended to a subgraph: with the paper's formula its label
// reaches the readout through W_self (mean pool); with zero_without_in_edges its state is 0
// whatever its label, as in the reference code.
TEST_F(GrailModelTest, ZeroWithoutInEdgesSilencesNodesThatReceiveNoMessage) {
  SubgraphBatch near = Batch({queries_[0]});
  near.dist_u.push_back(1);
  near.dist_v.push_back(1);
  near.node_graph.push_back(0);
  SubgraphBatch far = near;
  far.dist_u.back() = 3;
  far.dist_v.back() = 2;

  std::unique_ptr<GrailModel> paper = NewModel();
  EXPECT_NE(*paper->Score(near), *paper->Score(far));

  GrailConfig config;
  config.zero_without_in_edges = true;
  std::unique_ptr<GrailModel> reference = NewModel(config);
  EXPECT_EQ(*reference->Score(near), *reference->Score(far));
  // The node still counts in the mean pool: the score is not the subgraph's own.
  EXPECT_NE(*reference->Score(near), *reference->Score(Batch({queries_[0]})));

  const std::string path = TempPath("zero_without_in_edges.pt");
  ASSERT_TRUE(reference->Save(path).ok());
  std::unique_ptr<GrailModel> loaded = *GrailModel::Load(path);
  EXPECT_TRUE(loaded->config().zero_without_in_edges);
  EXPECT_EQ(*loaded->Score(far), *reference->Score(far));
}

// Early fusion: fixed per-entity features concatenated to the labels.
class NodeFeatureModelTest : public GrailModelTest {
 protected:
  static constexpr int kDim = 3;

  // Features for `entities`, row i = (i + 1) * (0.5, -0.25, 1) unless `zero` names it.
  static NodeFeatures Features(const std::vector<std::string>& entities,
                               const std::string& zero = "") {
    NodeFeatures f;
    f.entities = entities;
    f.dim = kDim;
    for (size_t i = 0; i < entities.size(); ++i) {
      const float scale = entities[i] == zero ? 0.0f : static_cast<float>(i + 1);
      for (float v : {0.5f, -0.25f, 1.0f}) f.values.push_back(scale * v);
    }
    return f;
  }

  // One hop: some of the queries' subgraphs hold "e", others do not.
  static GrailConfig FeatureConfig() {
    GrailConfig config;
    config.hops = 1;
    config.node_feature_dim = kDim;
    return config;
  }

  std::unique_ptr<GrailModel> NewFeatureModel(const NodeFeatures& features, uint64_t seed = 3) {
    const GrailConfig config = FeatureConfig();
    absl::StatusOr<std::unique_ptr<GrailModel>> model =
        GrailModel::Create(config, indexed_.relations.names(), seed, "cpu", &features);
    EXPECT_TRUE(model.ok()) << model.status();
    return model.ok() ? *std::move(model) : nullptr;
  }

  // The queries' subgraphs, each node carrying `model`'s row for its entity.
  SubgraphBatch FeatureBatch(const GrailModel& model) {
    const std::vector<int32_t> rows = model.NodeFeatureRows(indexed_.entities.names());
    SubgraphBatch batch;
    for (const NamedTriple& q : queries_) {
      EnclosingSubgraph s = Extract(q.head, q.relation, q.tail, FeatureConfig());
      AttachNodeFeatures(rows, &s);
      batch.Add(s, *indexed_.relations.Find(q.relation), {});
    }
    return batch;
  }

  // Whether query i's subgraph holds `entity`.
  bool Holds(size_t i, const std::string& entity) {
    const EnclosingSubgraph s =
        Extract(queries_[i].head, queries_[i].relation, queries_[i].tail, FeatureConfig());
    const EntityId id = *indexed_.entities.Find(entity);
    return std::find(s.nodes.begin(), s.nodes.end(), id) != s.nodes.end();
  }

  // The model's features listed in an order other than the graph's ids, so a row is found by
  // name, not by id.
  const std::vector<std::string> entities_ = {"e", "d", "c", "b", "a"};
};

TEST_F(NodeFeatureModelTest, AnEntitysFeaturesChangeOnlyTheScoresOfSubgraphsThatHoldIt) {
  std::unique_ptr<GrailModel> model = NewFeatureModel(Features(entities_));
  EXPECT_EQ(model->config().input_dim(), model->config().label_dim() + kDim + 1);
  EXPECT_EQ(model->NodeFeatureRow("c"), 2);
  EXPECT_EQ(model->NodeFeatureRow("unknown"), 5);  // the zero row after the five
  NodeFeatures changed = Features(entities_);
  for (int k = 0; k < kDim; ++k) changed.values[0 * kDim + k] = 7.0f;  // "e"'s row
  std::unique_ptr<GrailModel> other = NewFeatureModel(changed);        // same seed, same weights
  const std::vector<float> a = *model->Score(FeatureBatch(*model));
  const std::vector<float> b = *other->Score(FeatureBatch(*other));
  int holding = 0;
  for (size_t i = 0; i < queries_.size(); ++i) {
    if (Holds(i, "e")) {
      ++holding;
      EXPECT_NE(a[i], b[i]) << i;
    } else {
      EXPECT_EQ(a[i], b[i]) << i;
    }
  }
  EXPECT_GT(holding, 0);
  EXPECT_LT(holding, static_cast<int>(queries_.size()));
}

TEST_F(NodeFeatureModelTest, AnEntityWithoutFeaturesGetsZerosAndTheFlagBit) {
  // "e" listed with a zero row, against "e" not listed and every other row the same: the
  // inputs differ only in e's flag bit.
  const NodeFeatures zero_e = Features(entities_, "e");
  NodeFeatures without_e;
  without_e.entities = {"d", "c", "b", "a"};
  without_e.dim = kDim;
  without_e.values.assign(zero_e.values.begin() + kDim, zero_e.values.end());
  std::unique_ptr<GrailModel> listed = NewFeatureModel(zero_e);
  std::unique_ptr<GrailModel> unlisted = NewFeatureModel(without_e);
  EXPECT_EQ(unlisted->NodeFeatureRow("e"), 4);
  const std::vector<float> a = *listed->Score(FeatureBatch(*listed));
  const std::vector<float> b = *unlisted->Score(FeatureBatch(*unlisted));
  for (size_t i = 0; i < queries_.size(); ++i) {
    if (Holds(i, "e")) {
      EXPECT_NE(a[i], b[i]) << i;
    } else {
      EXPECT_EQ(a[i], b[i]) << i;
    }
  }
}

TEST_F(NodeFeatureModelTest, TheArchiveCarriesTheFeaturesAndScoresExactlyLikeTheModel) {
  std::unique_ptr<GrailModel> model = NewFeatureModel(Features(entities_));
  const std::string path = TempPath("node_features.pt");
  ASSERT_TRUE(model->Save(path).ok());
  absl::StatusOr<std::unique_ptr<GrailModel>> loaded = GrailModel::Load(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ((*loaded)->config().node_feature_dim, kDim);
  EXPECT_EQ((*loaded)->node_feature_entities(), entities_);
  EXPECT_EQ((*loaded)->NodeFeatureRow("a"), 4);
  const SubgraphBatch batch = FeatureBatch(*model);
  EXPECT_EQ(*(*loaded)->Score(batch), *model->Score(batch));
  // Attention reads the same first-layer input as the forward.
  absl::StatusOr<std::vector<std::vector<float>>> attention = (*loaded)->EdgeAttention(batch);
  ASSERT_TRUE(attention.ok()) << attention.status();
  EXPECT_EQ(attention->size(), static_cast<size_t>(model->config().num_layers));
}

TEST_F(NodeFeatureModelTest, MissingOrMismatchedFeaturesAreRefused) {
  GrailConfig config;
  config.node_feature_dim = kDim;
  EXPECT_EQ(GrailModel::Create(config, indexed_.relations.names(), 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  NodeFeatures wrong = Features(entities_);
  wrong.dim = kDim + 1;
  EXPECT_EQ(
      GrailModel::Create(config, indexed_.relations.names(), 1, "cpu", &wrong).status().code(),
      absl::StatusCode::kInvalidArgument);
  // A batch without a row per node.
  std::unique_ptr<GrailModel> model = NewFeatureModel(Features(entities_));
  absl::StatusOr<std::vector<float>> scores = model->Score(Batch(queries_, FeatureConfig()));
  EXPECT_EQ(scores.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(scores.status().message(), HasSubstr("node features"));
  SubgraphBatch out_of_range = FeatureBatch(*model);
  out_of_range.node_feature[0] = 6;
  EXPECT_EQ(model->Score(out_of_range).status().code(), absl::StatusCode::kInvalidArgument);
  // A model without node features ignores rows it is given.
  GrailConfig plain_config = FeatureConfig();
  plain_config.node_feature_dim = 0;
  std::unique_ptr<GrailModel> plain = NewModel(plain_config);
  EXPECT_EQ(*plain->Score(FeatureBatch(*model)), *plain->Score(Batch(queries_, plain_config)));
}

TEST_F(GrailModelTest, UnknownTargetRelationIsRejected) {
  SubgraphBatch batch = Batch({queries_[0]});
  batch.target_relation[0] = 99;
  absl::StatusOr<std::vector<float>> scores = NewModel()->Score(batch);
  EXPECT_EQ(scores.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(NewModel()->Score(SubgraphBatch{}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(GrailModelTest, EdgesOfRelationsUnknownToTheModelAreLeftOut) {
  SubgraphBatch all = Batch({queries_[0]});
  SubgraphBatch mapped;
  RelationMap map = {0, -1, 2};  // the model does not know relation 1
  mapped.Add(Extract("a", "p", "c"), 0, map);
  EXPECT_LT(mapped.num_edges(), all.num_edges());
  for (int64_t r : mapped.edge_relation) EXPECT_NE(r, 1);
}

TEST_F(GrailModelTest, LoadingSomethingElseFailsNamingThePath) {
  const std::string path = TempPath("not_a_model.pt");
  std::ofstream(path) << "hello";
  absl::StatusOr<std::unique_ptr<GrailModel>> loaded = GrailModel::Load(path);
  ASSERT_FALSE(loaded.ok());
  EXPECT_THAT(loaded.status().message(), HasSubstr(path));
}

// Flips one byte at each of `offsets` of `bytes` in turn (xor 0x5a) and loads the result from
// `damaged`: each must load, or be refused by the container check with a message naming the
// path, before LibTorch reads it. Returns how many were refused.
int FlipsRefusedBeforeLibTorch(const std::string& bytes, const std::vector<size_t>& offsets,
                               const std::string& damaged) {
  int refused = 0;
  for (size_t at : offsets) {
    std::string copy = bytes;
    copy[at] = static_cast<char>(copy[at] ^ 0x5a);
    std::ofstream(damaged, std::ios::binary | std::ios::trunc) << copy;
    absl::StatusOr<std::unique_ptr<GrailModel>> result = GrailModel::Load(damaged);
    if (result.ok()) continue;
    ++refused;
    const std::string message(result.status().message());
    EXPECT_TRUE(absl::StrContains(message, damaged + " is damaged: ") ||
                absl::StrContains(message, damaged + " is not a model archive: "))
        << "byte " << at << ": " << message;
  }
  return refused;
}

// LibTorch reads an archive without checking its CRC-32s and crashed on a damaged one found
// by fuzzing (docs/RELIABILITY.md). Every flipped byte must now be refused with a clear
// message before LibTorch reads it, or be harmless (a byte no reader looks at).
TEST_F(GrailModelTest, AnArchiveWithAFlippedByteIsRefusedAsDamagedBeforeLibTorchReadsIt) {
  const std::string bytes = SavedArchiveBytes();
  ASSERT_GT(bytes.size(), 1000u);
  std::vector<size_t> offsets;
  for (size_t at = 0; at < bytes.size(); at += 61) offsets.push_back(at);
  const int refused = FlipsRefusedBeforeLibTorch(bytes, offsets, TempPath("damaged.pt"));
  // Most bytes matter (measured: 404 of 480 flips refused); the rest are padding, timestamps
  // and attributes that no reader uses.
  EXPECT_GT(refused, 3 * (static_cast<int>(offsets.size()) - refused));
}

// The zip's directory, byte by byte: the end record, TorchScript's zip64 end record and
// locator, and the fixed part of the first, a middle and the last central directory entry.
// The check read the end record's copy of the directory while LibTorch's miniz reads the zip64
// one, and skipped the disk numbers: a flipped byte there reached LibTorch ("unsupported
// multidisk archive", "invalid header or archive is corrupted"), and a crafted archive could
// have had one directory checked and another loaded.
TEST_F(GrailModelTest, AFlippedByteInTheZipDirectoryIsRefusedBeforeLibTorchReadsIt) {
  const std::string bytes = SavedArchiveBytes();
  auto read = [&](size_t at, int width) { return archive_surgery_internal::Get(bytes, at, width); };
  const size_t end = bytes.rfind(std::string("PK\x05\x06", 4));
  ASSERT_NE(end, std::string::npos);
  ASSERT_EQ(bytes.compare(end - 20, 4, "PK\x06\x07"), 0) << "no zip64 locator";
  ASSERT_EQ(bytes.compare(end - 76, 4, "PK\x06\x06"), 0) << "no zip64 end record";
  std::vector<size_t> offsets;
  for (size_t at = end - 76; at < bytes.size(); ++at) offsets.push_back(at);
  const uint64_t entries = read(end + 10, 2);
  ASSERT_GE(entries, 3u);
  uint64_t header = read(end + 16, 4);
  for (uint64_t i = 0; i < entries; ++i) {
    ASSERT_EQ(read(header, 4), 0x02014b50u) << "central directory entry " << i;
    if (i == 0 || i == entries / 2 || i == entries - 1) {
      for (size_t at = header; at < header + 46; ++at) offsets.push_back(at);
    }
    header += 46 + read(header + 28, 2) + read(header + 30, 2) + read(header + 32, 2);
  }
  const int refused = FlipsRefusedBeforeLibTorch(bytes, offsets, TempPath("damaged.pt"));
  // Versions, times, attributes and the zip64 record's own version fields are read by no one.
  EXPECT_GT(refused, static_cast<int>(offsets.size()) / 2) << "of " << offsets.size();
}

// An entry flagged as encrypted: LibTorch's reader refuses it but leaked its state doing so
// (found by fuzzing), so the container check refuses it first, in the central directory or
// in the local header.
TEST_F(GrailModelTest, AnArchiveWithAnEncryptedEntryIsRefusedBeforeLibTorchReadsIt) {
  GrailConfig config;
  config.dim = 8;
  const std::string saved = TempPath("plain.pt");
  ASSERT_TRUE((*GrailModel::Create(config, indexed_.relations.names(), 1))->Save(saved).ok());
  std::string bytes;
  {
    std::ifstream in(saved, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  for (const std::string& signature :
       {std::string("PK\x01\x02", 4), std::string("PK\x03\x04", 4)}) {
    // The general purpose flags: offset 8 in a central header, 6 in a local one.
    const size_t flags = signature[2] == 1 ? 8 : 6;
    const size_t at = bytes.find(signature);
    ASSERT_NE(at, std::string::npos);
    std::string copy = bytes;
    copy[at + flags] = static_cast<char>(copy[at + flags] | 0x1);
    const std::string encrypted = TempPath("encrypted.pt");
    std::ofstream(encrypted, std::ios::binary | std::ios::trunc) << copy;
    absl::StatusOr<std::unique_ptr<GrailModel>> loaded = GrailModel::Load(encrypted);
    ASSERT_FALSE(loaded.ok());
    EXPECT_THAT(loaded.status().message(), HasSubstr(" is encrypted or patch data"));
  }
}

// A tensor record cut short, grown, or swapped with another, in an archive that is still a
// well-formed zip (CRC-32s recomputed): LibTorch trusts the record and read memory it did not
// own (a cut record reloaded "fine" with 709 of 1,578 scores changed). Every case is refused
// naming the record or the tensor.
TEST_F(GrailModelTest, ATensorRecordCutGrownOrSwappedIsRefusedNamingIt) {
  GrailConfig config;
  config.dim = 8;
  const std::string saved = TempPath("records.pt");
  ASSERT_TRUE((*GrailModel::Create(config, indexed_.relations.names(), 1))->Save(saved).ok());
  const std::vector<ArchiveEntry> entries = ReadArchiveEntries(saved);
  // The two largest tensor records of equal size, for the swap.
  std::map<size_t, std::vector<std::string>> by_size;
  std::string largest;
  size_t largest_size = 0;
  for (const ArchiveEntry& e : entries) {
    if (e.name.find("/data/") == std::string::npos) continue;
    by_size[e.data.size()].push_back(e.name.substr(e.name.find("/data/") + 1));
    if (e.data.size() > largest_size) {
      largest_size = e.data.size();
      largest = e.name.substr(e.name.find("/data/") + 1);
    }
  }
  ASSERT_GT(largest_size, 16u);
  const std::string damaged = TempPath("records_damaged.pt");
  auto load_with = [&](const std::function<void(std::vector<ArchiveEntry>&)>& change) {
    std::vector<ArchiveEntry> copy = entries;
    change(copy);
    EXPECT_TRUE(WriteArchiveEntries(damaged, copy));
    return GrailModel::Load(damaged).status();
  };
  // Unchanged, the rewritten copy loads: the refusals below are the changes'.
  const absl::Status unchanged = load_with([](std::vector<ArchiveEntry>&) {});
  ASSERT_TRUE(unchanged.ok()) << unchanged;
  for (const size_t keep : {size_t{0}, largest_size - 4}) {
    const absl::Status cut =
        load_with([&](std::vector<ArchiveEntry>& e) { FindEntry(e, largest)->data.resize(keep); });
    EXPECT_EQ(cut.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(cut.message(), HasSubstr(damaged + " is damaged: record "));
    EXPECT_THAT(cut.message(), HasSubstr(largest + " holds " + std::to_string(keep) + " bytes"));
  }
  const absl::Status grown = load_with(
      [&](std::vector<ArchiveEntry>& e) { FindEntry(e, largest)->data += std::string(8, '\0'); });
  EXPECT_THAT(grown.message(), HasSubstr(largest + " holds " + std::to_string(largest_size + 8)));
  // Same-sized records swapped: sizes agree, the digests do not.
  const auto pair = std::find_if(by_size.begin(), by_size.end(),
                                 [](const auto& s) { return s.second.size() >= 2 && s.first > 0; });
  ASSERT_NE(pair, by_size.end());
  const absl::Status swapped = load_with([&](std::vector<ArchiveEntry>& e) {
    std::swap(FindEntry(e, pair->second[0])->data, FindEntry(e, pair->second[1])->data);
  });
  EXPECT_EQ(swapped.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(swapped.message(), HasSubstr(" differs from what its trainer wrote"));
}

// One weight changed, its record's CRC-32 recomputed: only the parameter digests written at
// save can tell, and they name the tensor.
TEST_F(GrailModelTest, AWeightChangedWithItsCrcRecomputedIsRefusedByItsDigest) {
  GrailConfig config;
  config.dim = 8;
  const std::string saved = TempPath("digest.pt");
  ASSERT_TRUE((*GrailModel::Create(config, indexed_.relations.names(), 1))->Save(saved).ok());
  std::vector<ArchiveEntry> entries = ReadArchiveEntries(saved);
  ArchiveEntry* record = FindEntry(entries, "data/0");
  ASSERT_NE(record, nullptr);
  ASSERT_GE(record->data.size(), 4u);
  record->data[1] = static_cast<char>(record->data[1] ^ 0x10);  // a float's low bits
  const std::string changed = TempPath("digest_changed.pt");
  ASSERT_TRUE(WriteArchiveEntries(changed, entries));
  const absl::Status status = GrailModel::Load(changed).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr(changed + " is damaged: tensor "));
  EXPECT_THAT(status.message(), HasSubstr(" differs from what its trainer wrote"));
}

TEST_F(GrailModelTest, CudaWithoutCudaIsAClearError) {
  absl::StatusOr<std::unique_ptr<GrailModel>> model =
      GrailModel::Create({}, indexed_.relations.names(), 1, "cuda");
  if (model.ok()) GTEST_SKIP() << "this LibTorch has CUDA";
  EXPECT_EQ(model.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(GrailModel::Create({}, indexed_.relations.names(), 1, "tpu").status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Python's torch.jit.load opens the archive and scores the batch exactly as C++ does.
TEST_F(GrailModelTest, PythonTorchJitLoadScoresTheArchiveLikeCpp) {
  if (std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "python3-torch is not installed";
  }
  std::unique_ptr<GrailModel> model = NewModel();
  const std::string path = TempPath("python.pt");
  ASSERT_TRUE(model->Save(path).ok());
  const SubgraphBatch batch = Batch(queries_);
  const std::vector<float> expected = *model->Score(batch);

  const std::string script = TempPath("score.py");
  std::ofstream py(script);
  auto list = [](const std::vector<int64_t>& v) { return "[" + absl::StrJoin(v, ",") + "]"; };
  py << "import torch\n"
     << "m = torch.jit.load('" << path << "')\n"
     << "t = lambda v: torch.tensor(v, dtype=torch.int64)\n"
     << "with torch.no_grad():\n"
     << "  s = m.forward(t(" << list(batch.dist_u) << "), t(" << list(batch.dist_v) << "), t("
     << list(batch.node_graph) << "), t(" << list(batch.edge_src) << "), t(" << list(batch.edge_dst)
     << "), t(" << list(batch.edge_relation) << "), t(" << list(batch.head_index) << "), t("
     << list(batch.tail_index) << "), t(" << list(batch.target_relation) << "), False)\n"
     << "print(m.format, m.hops, len(m.relations), ' '.join(repr(float(x)) for x in s))\n";
  py.close();
  FILE* pipe = popen(("/usr/bin/python3 " + script + " 2>&1").c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  char buffer[4096];
  while (fgets(buffer, sizeof(buffer), pipe) != nullptr) out += buffer;
  ASSERT_EQ(pclose(pipe), 0) << out;

  std::istringstream in(out);
  std::string format;
  int hops = 0;
  size_t relations = 0;
  in >> format >> hops >> relations;
  EXPECT_EQ(format, kGrailModelFormat);
  EXPECT_EQ(hops, 3);
  EXPECT_EQ(relations, indexed_.relations.size());
  for (float e : expected) {
    double got = 0;
    ASSERT_TRUE(in >> got) << out;
    EXPECT_NEAR(got, e, 1e-5 * (1 + std::abs(e)));
  }
}

// An archive whose weights hold NaN or Inf (a diverged training run, a damaged file) would
// serve NaN for every fact and rank arbitrarily: it is refused at load, naming the parameter.
TEST_F(GrailModelTest, LoadRefusesNonFiniteWeightsNamingTheParameter) {
  if (std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "python3-torch is not installed";
  }
  std::unique_ptr<GrailModel> model = NewModel();
  const std::string path = TempPath("finite.pt");
  ASSERT_TRUE(model->Save(path).ok());
  ASSERT_TRUE(GrailModel::Load(path).ok());
  for (const char* value : {"nan", "inf", "-inf"}) {
    const std::string broken = TempPath(absl::StrCat("broken_", value + (value[0] == '-'), ".pt"));
    const std::string script = TempPath("poison.py");
    std::ofstream(script) << "import torch\n"
                          << "m = torch.jit.load('" << path << "')\n"
                          << "name, p = list(m.named_parameters())[-1]\n"
                          << "with torch.no_grad():\n"
                          << "  p.view(-1)[0] = float('" << value
                          << "')\n"
                          // No digests: as a trainer that diverged, or an older archive.
                          << "m._c.setattr('parameter_digests', '')\n"
                          << "torch.jit.save(m, '" << broken << "')\n"
                          << "print(name)\n";
    FILE* pipe = popen(("/usr/bin/python3 " + script + " 2>&1").c_str(), "r");
    ASSERT_NE(pipe, nullptr);
    std::string name;
    char buffer[4096];
    while (fgets(buffer, sizeof(buffer), pipe) != nullptr) name += buffer;
    ASSERT_EQ(pclose(pipe), 0) << name;
    name = name.substr(0, name.find('\n'));

    absl::StatusOr<std::unique_ptr<GrailModel>> loaded = GrailModel::Load(broken);
    ASSERT_FALSE(loaded.ok()) << value;
    EXPECT_EQ(loaded.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(loaded.status().message(), HasSubstr(name)) << value;
    EXPECT_THAT(loaded.status().message(), HasSubstr("NaN or Inf")) << value;
  }
}

}  // namespace
}  // namespace grail
