// A fixture for tests that serve one archive: the real grail-server on a fresh store, a stub
// to call it, and the facts added so far (to score them offline the same way).
#ifndef GRAIL_TESTS_TESTING_SERVED_ARCHIVE_H_
#define GRAIL_TESTS_TESTING_SERVED_ARCHIVE_H_

#include <memory>
#include <string>
#include <vector>

#include "graph/triple_file.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "kg/v1/knowledge_graph.grpc.pb.h"
#include "tests/testing/graph_calls.h"
#include "tests/testing/server_process.h"
#include "tests/testing/temp_dir.h"

namespace grail {

class ServedArchiveFixture : public ::testing::Test {
 protected:
  // Starts grail-server on the archive at `archive` with a store in this test's directory,
  // and `flags` besides.
  void StartServer(const std::string& archive, const std::vector<std::string>& flags = {}) {
    std::vector<std::string> args = {"--model=" + archive, "--data-dir=" + dir_.Sub("store")};
    args.insert(args.end(), flags.begin(), flags.end());
    ASSERT_TRUE(server_.Start(args, dir_.Sub("server.log")));
    stub_ = kg::v1::KnowledgeGraph::NewStub(
        grpc::CreateChannel(server_.target(), grpc::InsecureChannelCredentials()));
  }

  // AddTriples of `facts` as one chunk, remembered in stored_.
  void Add(const std::vector<NamedTriple>& facts) {
    ASSERT_NE(stub_, nullptr) << "the server did not start";
    const AddOutcome added = AddChunks(*stub_, {facts});
    ASSERT_TRUE(added.status.ok()) << added.status.error_message();
    stored_.insert(stored_.end(), facts.begin(), facts.end());
  }

  ScopedTempDir dir_;
  ServerProcess server_;
  std::unique_ptr<kg::v1::KnowledgeGraph::Stub> stub_;
  std::vector<NamedTriple> stored_;
};

}  // namespace grail

#endif  // GRAIL_TESTS_TESTING_SERVED_ARCHIVE_H_
