// grail-server's transport security and access control, end to end: the real binary on a
// loopback port with TLS files made by openssl, a token file, and real gRPC clients (the
// C++ API and the grail-client binary).
#include <httplib.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/channel.h"
#include "gmock/gmock.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "kg/v1/knowledge_graph.grpc.pb.h"
#include "model/grail/grail_model.h"
#include "tests/testing/reflection_call.h"
#include "tests/testing/run_binary.h"
#include "tests/testing/saved_model.h"
#include "tests/testing/server_process.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/test_certificates.h"

namespace grail {
namespace {

using kg::v1::KnowledgeGraph;
using ::testing::HasSubstr;
using ::testing::Not;

const std::vector<std::string> kRelations = {"r0", "r1"};

// Tokens of the file the servers start with (at least 16 characters each).
const std::string kReadToken = "read-token-0123456789abcdef";
const std::string kWriteToken = "write-token-0123456789abcdef";
const std::string kAdminToken = "admin-token-0123456789abcdef";

void WriteFile(const std::string& path, const std::string& text) {
  // Written under another name and renamed, as an operator's tooling (or a Kubernetes
  // Secret update) replaces a file.
  const std::string temporary = path + ".tmp";
  std::ofstream(temporary, std::ios::binary | std::ios::trunc) << text;
  std::filesystem::rename(temporary, path);
}

std::shared_ptr<grpc::Channel> Channel(const std::string& target, const ChannelOptions& base) {
  ChannelOptions options = base;
  options.target = target;
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      MakeChannel(options, grpc::ChannelArguments());
  EXPECT_TRUE(channel.ok()) << channel.status();
  return channel.ok() ? *channel : nullptr;
}

std::chrono::system_clock::time_point Soon() {
  return std::chrono::system_clock::now() + std::chrono::seconds(10);
}

grpc::Status GetStats(const std::shared_ptr<grpc::Channel>& channel) {
  auto stub = KnowledgeGraph::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(Soon());
  kg::v1::GetStatsResponse response;
  return stub->GetStats(&context, kg::v1::GetStatsRequest(), &response);
}

kg::v1::Triple Fact(const std::string& h, const std::string& r, const std::string& t) {
  kg::v1::Triple triple;
  triple.set_head(h);
  triple.set_relation(r);
  triple.set_tail(t);
  return triple;
}

// One call of each KnowledgeGraph RPC, by name; returns its status.
std::map<std::string, grpc::Status> CallEveryRpc(const std::shared_ptr<grpc::Channel>& channel,
                                                 int round) {
  auto stub = KnowledgeGraph::NewStub(channel);
  std::map<std::string, grpc::Status> out;
  {
    grpc::ClientContext context;
    context.set_deadline(Soon());
    kg::v1::ScoreTripletRequest request;
    *request.mutable_triple() = Fact("a", "r0", "b");
    kg::v1::ScoreTripletResponse response;
    out["ScoreTriplet"] = stub->ScoreTriplet(&context, request, &response);
  }
  {
    grpc::ClientContext context;
    context.set_deadline(Soon());
    kg::v1::ScoreTripletsRequest request;
    *request.add_triples() = Fact("a", "r1", "c");
    kg::v1::ScoreTripletsResponse response;
    out["ScoreTriplets"] = stub->ScoreTriplets(&context, request, &response);
  }
  {
    grpc::ClientContext context;
    context.set_deadline(Soon());
    kg::v1::RankTailsRequest request;
    request.set_head("a");
    request.set_relation("r0");
    kg::v1::RankResponse response;
    out["RankTails"] = stub->RankTails(&context, request, &response);
  }
  {
    grpc::ClientContext context;
    context.set_deadline(Soon());
    kg::v1::RankHeadsRequest request;
    request.set_relation("r0");
    request.set_tail("b");
    kg::v1::RankResponse response;
    out["RankHeads"] = stub->RankHeads(&context, request, &response);
  }
  out["GetStats"] = GetStats(channel);
  {
    grpc::ClientContext context;
    context.set_deadline(Soon());
    auto stream = stub->AddTriples(&context);
    kg::v1::AddTriplesRequest request;
    *request.add_triples() = Fact(absl::StrCat("new", round), "r1", "a");
    kg::v1::AddTriplesAck ack;
    if (stream->Write(request)) stream->Read(&ack);
    stream->WritesDone();
    out["AddTriples"] = stream->Finish();
  }
  {
    grpc::ClientContext context;
    context.set_deadline(Soon());
    auto stream = stub->RemoveTriples(&context);
    kg::v1::RemoveTriplesRequest request;
    *request.add_triples() = Fact(absl::StrCat("gone", round), "r1", "a");
    kg::v1::RemoveTriplesAck ack;
    if (stream->Write(request)) stream->Read(&ack);
    stream->WritesDone();
    out["RemoveTriples"] = stream->Finish();
  }
  {
    grpc::ClientContext context;
    context.set_deadline(Soon());
    kg::v1::ReloadModelResponse response;
    out["ReloadModel"] = stub->ReloadModel(&context, kg::v1::ReloadModelRequest(), &response);
  }
  {
    grpc::ClientContext context;
    context.set_deadline(Soon());
    auto stream = stub->ExportTriples(&context, kg::v1::ExportTriplesRequest());
    kg::v1::ExportTriplesResponse page;
    while (stream->Read(&page)) {
    }
    out["ExportTriples"] = stream->Finish();
  }
  return out;
}

// Whether the server's standard health service answers SERVING over `channel`.
bool Serving(const std::shared_ptr<grpc::Channel>& channel) {
  absl::StatusOr<int> health = CheckHealth(channel, std::chrono::seconds(10));
  return health.ok() && *health == 1;
}

// Repeats `check` until it holds or about 30 s pass (a bound, not a timing assertion: the
// server re-reads files on its own schedule).
template <typename Check>
bool Eventually(Check check) {
  for (int i = 0; i < 300; ++i) {
    if (check()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

class SecurityTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScopedTempDir();
    ASSERT_TRUE(
        SaveUntrainedModel(dir_->Sub("model.pt"), kRelations, /*seed=*/3, TwoHopConfig()).ok());
    ASSERT_TRUE(MakeCertificateAuthority(dir_->path(), "ca"));
    ASSERT_TRUE(MakeCertificateAuthority(dir_->path(), "other_ca"));
    ASSERT_TRUE(MakeSignedCertificate(dir_->path(), "server", "ca"));
    ASSERT_TRUE(MakeSignedCertificate(dir_->path(), "server_other", "other_ca"));
    ASSERT_TRUE(MakeSignedCertificate(dir_->path(), "client", "ca"));
    ASSERT_TRUE(MakeSignedCertificate(dir_->path(), "client_other", "other_ca"));
  }
  static void TearDownTestSuite() { delete dir_; }

  // Starts a server with a fresh store and `flags`, seeded with a few facts through a
  // channel made with `seed_options` (which must be allowed to write).
  bool StartServer(std::vector<std::string> flags, const ChannelOptions& seed_options = {}) {
    flags.push_back("--model=" + dir_->Sub("model.pt"));
    flags.push_back("--data-dir=" + store_.Sub("store"));
    if (!server_.Start(flags, store_.Sub("server.log"))) return false;
    auto stub = KnowledgeGraph::NewStub(Channel(server_.target(), seed_options));
    grpc::ClientContext context;
    context.set_deadline(Soon());
    auto stream = stub->AddTriples(&context);
    kg::v1::AddTriplesRequest request;
    *request.add_triples() = Fact("a", "r0", "b");
    *request.add_triples() = Fact("b", "r1", "c");
    *request.add_triples() = Fact("c", "r0", "a");
    kg::v1::AddTriplesAck ack;
    const bool written = stream->Write(request) && stream->Read(&ack);
    stream->WritesDone();
    const grpc::Status status = stream->Finish();
    EXPECT_TRUE(written && status.ok()) << status.error_message() << "\n" << server_.Log();
    return written && status.ok();
  }

  std::string TokenFile(const std::string& text) {
    const std::string path = store_.Sub("tokens.txt");
    WriteFile(path, text);
    return path;
  }
  static std::string DefaultTokens() {
    return "# token scope name\n" + kReadToken + " read reader\n" + kWriteToken +
           " write writer\n" + kAdminToken + " admin\n";
  }
  static ChannelOptions WithToken(const std::string& token) {
    ChannelOptions options;
    options.token = token;
    return options;
  }
  static ChannelOptions Tls(const std::string& ca = "ca") {
    ChannelOptions options;
    options.tls_ca = dir_->Sub(ca + ".crt");
    return options;
  }

  static ScopedTempDir* dir_;
  ScopedTempDir store_;
  ServerProcess server_;
};

ScopedTempDir* SecurityTest::dir_ = nullptr;

TEST_F(SecurityTest, TlsServesTlsClientsAndRefusesPlaintextOnes) {
  ASSERT_TRUE(StartServer(
      {"--tls-cert=" + dir_->Sub("server.crt"), "--tls-key=" + dir_->Sub("server.key")}, Tls()));
  EXPECT_TRUE(GetStats(Channel(server_.target(), Tls())).ok());
  // By name as well as by address: the certificate carries both.
  EXPECT_TRUE(GetStats(Channel("localhost:" + std::to_string(server_.port()), Tls())).ok());

  const grpc::Status plaintext = GetStats(Channel(server_.target(), {}));
  EXPECT_EQ(plaintext.error_code(), grpc::StatusCode::UNAVAILABLE) << plaintext.error_message();
  // A client that trusts another CA does not accept the server.
  const grpc::Status untrusted = GetStats(Channel(server_.target(), Tls("other_ca")));
  EXPECT_EQ(untrusted.error_code(), grpc::StatusCode::UNAVAILABLE);
  // The server keeps serving TLS clients after refusing those.
  EXPECT_TRUE(GetStats(Channel(server_.target(), Tls())).ok());
}

TEST_F(SecurityTest, MutualTlsNeedsAClientCertificateSignedByTheClientCa) {
  ChannelOptions with_certificate = Tls();
  with_certificate.tls_cert = dir_->Sub("client.crt");
  with_certificate.tls_key = dir_->Sub("client.key");
  ASSERT_TRUE(
      StartServer({"--tls-cert=" + dir_->Sub("server.crt"), "--tls-key=" + dir_->Sub("server.key"),
                   "--tls-client-ca=" + dir_->Sub("ca.crt")},
                  with_certificate));
  EXPECT_TRUE(GetStats(Channel(server_.target(), with_certificate)).ok());

  const grpc::Status without = GetStats(Channel(server_.target(), Tls()));
  EXPECT_EQ(without.error_code(), grpc::StatusCode::UNAVAILABLE) << without.error_message();

  ChannelOptions foreign = Tls();
  foreign.tls_cert = dir_->Sub("client_other.crt");
  foreign.tls_key = dir_->Sub("client_other.key");
  const grpc::Status refused = GetStats(Channel(server_.target(), foreign));
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAVAILABLE) << refused.error_message();
}

TEST_F(SecurityTest, EachScopeAgainstEachRpc) {
  ASSERT_TRUE(StartServer({"--auth-tokens=" + TokenFile(DefaultTokens())}, WithToken(kWriteToken)));
  const std::vector<std::string> reads = {"ScoreTriplet", "ScoreTriplets", "RankTails", "RankHeads",
                                          "GetStats"};
  int round = 0;
  for (const std::string& token : {std::string(), std::string("not-a-known-token-at-all")}) {
    for (const auto& [rpc, status] :
         CallEveryRpc(Channel(server_.target(), WithToken(token)), ++round)) {
      EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED)
          << rpc << " with token '" << token << "': " << status.error_message();
    }
  }
  for (const auto& [rpc, status] :
       CallEveryRpc(Channel(server_.target(), WithToken(kReadToken)), ++round)) {
    if (rpc == "AddTriples" || rpc == "RemoveTriples" || rpc == "ReloadModel" ||
        rpc == "ExportTriples") {
      EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << rpc;
      EXPECT_THAT(status.error_message(),
                  HasSubstr(rpc == "ReloadModel" ? "needs admin" : "needs write"));
      EXPECT_THAT(status.error_message(), Not(HasSubstr(kReadToken)));
    } else {
      EXPECT_TRUE(status.ok()) << rpc << ": " << status.error_message();
    }
  }
  for (const std::string& token : {kWriteToken, kAdminToken}) {
    for (const auto& [rpc, status] :
         CallEveryRpc(Channel(server_.target(), WithToken(token)), ++round)) {
      if (rpc == "ReloadModel" && token == kWriteToken) {
        EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
        EXPECT_THAT(status.error_message(), HasSubstr("needs admin"));
        continue;
      }
      EXPECT_TRUE(status.ok()) << rpc << " with " << token << ": " << status.error_message();
    }
  }
  // A token in another scheme is refused, named as such.
  {
    auto stub = KnowledgeGraph::NewStub(Channel(server_.target(), {}));
    grpc::ClientContext context;
    context.AddMetadata("authorization", "Basic " + kAdminToken);
    kg::v1::GetStatsResponse response;
    const grpc::Status status = stub->GetStats(&context, kg::v1::GetStatsRequest(), &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_THAT(status.error_message(), HasSubstr("Bearer"));
  }
  // Health stays open, for probes.
  EXPECT_TRUE(Serving(Channel(server_.target(), {})));

  // Per-token counters by name, never by secret.
  httplib::Client http("127.0.0.1", server_.metrics_port());
  httplib::Result metrics = http.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_THAT(metrics->body,
              HasSubstr("grail_auth_requests_total{method=\"GetStats\",outcome=\"ok\","
                        "token=\"reader\"} 1\n"));
  EXPECT_THAT(metrics->body, HasSubstr("grail_auth_requests_total{method=\"AddTriples\","
                                       "outcome=\"insufficient_scope\",token=\"reader\"} 1\n"));
  EXPECT_THAT(metrics->body, HasSubstr("token=\"sha256-"));  // the unnamed admin token
  EXPECT_THAT(metrics->body, HasSubstr("outcome=\"unknown\",token=\"\"} 1\n"));
  EXPECT_THAT(metrics->body, HasSubstr("grail_auth_tokens 3\n"));
  for (const std::string& secret : {kReadToken, kWriteToken, kAdminToken}) {
    EXPECT_THAT(metrics->body, Not(HasSubstr(secret)));
    EXPECT_THAT(server_.Log(), Not(HasSubstr(secret)));
  }
}

TEST_F(SecurityTest, TokenFileChangesTakeEffectWithoutRestart) {
  const std::string path = TokenFile(DefaultTokens());
  ASSERT_TRUE(StartServer({"--auth-tokens=" + path}, WithToken(kWriteToken)));
  const pid_t pid = server_.pid();
  const std::string rotated = "rotated-token-0123456789abcdef";
  auto reader = Channel(server_.target(), WithToken(kReadToken));
  auto rotated_channel = Channel(server_.target(), WithToken(rotated));
  ASSERT_TRUE(GetStats(reader).ok());
  ASSERT_EQ(GetStats(rotated_channel).error_code(), grpc::StatusCode::UNAUTHENTICATED);

  // The read token is replaced by another: the new one works, the old one stops working.
  WriteFile(path, rotated + " read reader\n" + kWriteToken + " write writer\n");
  EXPECT_TRUE(Eventually([&] { return GetStats(rotated_channel).ok(); })) << server_.Log();
  EXPECT_EQ(GetStats(reader).error_code(), grpc::StatusCode::UNAUTHENTICATED);

  // A broken file is refused as a whole: the tokens in use stay, and the log says why.
  WriteFile(path, rotated + " superuser\n");
  EXPECT_TRUE(Eventually([&] {
    return server_.Log().find("tokens_not_reloaded") != std::string::npos;
  })) << server_.Log();
  EXPECT_THAT(server_.Log(), HasSubstr("line 1: unknown scope"));
  EXPECT_TRUE(GetStats(rotated_channel).ok());

  // SIGHUP re-reads it at once, even a change the once-a-second check cannot see: the same
  // inode, size and modification time.
  WriteFile(path, kReadToken + " read\n");
  EXPECT_TRUE(Eventually([&] { return GetStats(reader).ok(); })) << server_.Log();
  const std::string sighup_token = "sighup-token-0123456789abcd";
  ASSERT_EQ(sighup_token.size(), kReadToken.size());
  const std::filesystem::file_time_type stamp = std::filesystem::last_write_time(path);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << sighup_token + " read\n";
  std::filesystem::last_write_time(path, stamp);
  auto sighup_channel = Channel(server_.target(), WithToken(sighup_token));
  server_.Signal(SIGHUP);
  EXPECT_TRUE(Eventually([&] { return GetStats(sighup_channel).ok(); })) << server_.Log();
  EXPECT_EQ(GetStats(reader).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(server_.pid(), pid);  // the same process throughout
  EXPECT_EQ(server_.Stop(), 0);
}

TEST_F(SecurityTest, RotatedCertificateIsServedWithoutRestart) {
  const std::string cert = store_.Sub("tls.crt"), key = store_.Sub("tls.key");
  std::filesystem::copy_file(dir_->Sub("server.crt"), cert);
  std::filesystem::copy_file(dir_->Sub("server.key"), key);
  ASSERT_TRUE(
      StartServer({"--tls-cert=" + cert, "--tls-key=" + key, "--tls-reload-seconds=1"}, Tls()));
  ASSERT_TRUE(GetStats(Channel(server_.target(), Tls())).ok());
  ASSERT_FALSE(GetStats(Channel(server_.target(), Tls("other_ca"))).ok());

  // The key first, then the certificate, as a rotation might land: until both match the
  // provider keeps the pair it has.
  WriteFile(key, ReadTextFile(dir_->Sub("server_other.key")));
  WriteFile(cert, ReadTextFile(dir_->Sub("server_other.crt")));
  // A new channel per try: a connection keeps the session it was made with.
  EXPECT_TRUE(Eventually([&] { return GetStats(Channel(server_.target(), Tls("other_ca"))).ok(); }))
      << server_.Log();
  EXPECT_FALSE(GetStats(Channel(server_.target(), Tls())).ok());
}

TEST_F(SecurityTest, BadTlsFilesFailTheStartNamingTheFile) {
  const std::string flags =
      absl::StrCat("--model=", dir_->Sub("model.pt"), " --data-dir=", store_.Sub("bad"),
                   " --port=0", " --metrics-port=-1 --tls-cert=", dir_->Sub("server.crt"),
                   " --tls-key=", dir_->Sub("client.key"));
  const BinaryRun run = RunBinary("grail-server", flags);
  EXPECT_NE(run.exit_code, 0);
  EXPECT_THAT(run.all(), HasSubstr("does not belong to the certificate"));

  const BinaryRun tokens = RunBinary(
      "grail-server",
      absl::StrCat("--model=", dir_->Sub("model.pt"), " --data-dir=", store_.Sub("bad"),
                   " --port=0 --metrics-port=-1", " --auth-tokens=", TokenFile("short read\n")));
  EXPECT_NE(tokens.exit_code, 0);
  EXPECT_THAT(tokens.all(), HasSubstr("line 1: a token is 16 to 4096"));
}

TEST_F(SecurityTest, ReflectionCanBeClosed) {
  ASSERT_TRUE(StartServer({"--reflection=false"}));
  const grpc::Status status =
      ListServicesByReflection(Channel(server_.target(), {}), Soon()).status;
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNIMPLEMENTED) << status.error_message();
  EXPECT_TRUE(Serving(Channel(server_.target(), {})));
}

TEST_F(SecurityTest, ClientBinaryTakesTlsAndTokenFlagsAndTheEnvironment) {
  ChannelOptions seed = Tls();
  seed.token = kWriteToken;
  ASSERT_TRUE(
      StartServer({"--tls-cert=" + dir_->Sub("server.crt"), "--tls-key=" + dir_->Sub("server.key"),
                   "--auth-tokens=" + TokenFile(DefaultTokens())},
                  seed));
  const std::string tls =
      absl::StrCat("--target=", server_.target(), " --tls-ca=", dir_->Sub("ca.crt"));
  const BinaryRun flag = RunBinary("grail-client", tls + " --token=" + kReadToken + " stats");
  EXPECT_EQ(flag.exit_code, 0) << flag.all();
  EXPECT_THAT(flag.out, HasSubstr("\"facts\":3"));

  const BinaryRun environment =
      RunBinary("grail-client", tls + " score a r0 b");  // GRAIL_TOKEN below
  EXPECT_EQ(environment.exit_code, 1);
  EXPECT_THAT(environment.err, HasSubstr("UNAUTHENTICATED"));
  setenv("GRAIL_TOKEN", kReadToken.c_str(), 1);
  const BinaryRun with_env = RunBinary("grail-client", tls + " score a r0 b");
  unsetenv("GRAIL_TOKEN");
  EXPECT_EQ(with_env.exit_code, 0) << with_env.all();

  WriteFile(store_.Sub("facts.txt"), "x\tr0\ty\n");
  const BinaryRun denied =
      RunBinary("grail-client", tls + " --token=" + kReadToken + " add " + store_.Sub("facts.txt"));
  EXPECT_EQ(denied.exit_code, 1);
  EXPECT_THAT(denied.err, HasSubstr("PERMISSION_DENIED"));
  const BinaryRun allowed = RunBinary(
      "grail-client", tls + " --token=" + kWriteToken + " add " + store_.Sub("facts.txt"));
  EXPECT_EQ(allowed.exit_code, 0) << allowed.all();

  // The probe command: health over TLS, with no token.
  const BinaryRun health = RunBinary("grail-client", tls + " health");
  EXPECT_EQ(health.exit_code, 0) << health.all();
  EXPECT_EQ(health.out, "SERVING\n");
  const BinaryRun plaintext =
      RunBinary("grail-client", absl::StrCat("--target=", server_.target(), " health"));
  EXPECT_EQ(plaintext.exit_code, 1);
  EXPECT_THAT(plaintext.err, HasSubstr("UNAVAILABLE"));
}

}  // namespace
}  // namespace grail
