// One call of gRPC server reflection, without its generated stubs: it asks for the list of
// services (ServerReflectionRequest.list_services = "", field 7) over a generic stream.
#ifndef GRAIL_TESTS_TESTING_REFLECTION_CALL_H_
#define GRAIL_TESTS_TESTING_REFLECTION_CALL_H_

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"

namespace grail {

struct ReflectionReply {
  grpc::Status status;
  std::string bytes;  // the raw response, in which service names appear verbatim
};

inline ReflectionReply ListServicesByReflection(const std::shared_ptr<grpc::Channel>& channel,
                                                std::chrono::system_clock::time_point deadline) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.set_deadline(deadline);
  grpc::CompletionQueue cq;
  auto call = stub.PrepareCall(
      &context, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", &cq);
  void* tag;
  bool ok;
  call->StartCall(reinterpret_cast<void*>(1));
  cq.Next(&tag, &ok);
  const char request_bytes[] = {0x3a, 0x00};
  grpc::Slice slice(request_bytes, sizeof(request_bytes));
  grpc::ByteBuffer request(&slice, 1);
  call->Write(request, reinterpret_cast<void*>(2));
  cq.Next(&tag, &ok);
  grpc::ByteBuffer response;
  call->Read(&response, reinterpret_cast<void*>(3));
  cq.Next(&tag, &ok);
  ReflectionReply reply;
  if (ok) {
    std::vector<grpc::Slice> slices;
    (void)response.Dump(&slices);
    for (const grpc::Slice& s : slices) {
      reply.bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
  }
  call->WritesDone(reinterpret_cast<void*>(4));
  cq.Next(&tag, &ok);
  call->Finish(&reply.status, reinterpret_cast<void*>(5));
  cq.Next(&tag, &ok);
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  return reply;
}

}  // namespace grail

#endif  // GRAIL_TESTS_TESTING_REFLECTION_CALL_H_
