#include "client/triple_export.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"

namespace grail {
namespace {

// Cancels a call when it goes `timeout` without Progress(): what a per-message deadline
// would be, for a stream whose length is not known in advance.
class StallWatch {
 public:
  StallWatch(grpc::ClientContext* context, std::chrono::milliseconds timeout) {
    if (timeout.count() <= 0) return;
    thread_ = std::thread([this, context, timeout] {
      std::unique_lock<std::mutex> lock(mu_);
      for (;;) {
        const uint64_t seen = progress_;
        if (cv_.wait_for(lock, timeout, [&] { return done_ || progress_ != seen; })) {
          if (done_) return;
          continue;
        }
        stalled_ = true;
        context->TryCancel();
        return;
      }
    });
  }
  ~StallWatch() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  void Progress() {
    std::lock_guard<std::mutex> lock(mu_);
    ++progress_;
    cv_.notify_all();
  }
  bool stalled() {
    std::lock_guard<std::mutex> lock(mu_);
    return stalled_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t progress_ = 0;
  bool done_ = false;
  bool stalled_ = false;
  std::thread thread_;
};

}  // namespace

absl::StatusOr<ExportSummary> ExportTriples(
    kg::v1::KnowledgeGraph::StubInterface& stub, const ExportOptions& options,
    const std::function<absl::Status(const kg::v1::ExportTriplesResponse&)>& on_page) {
  const auto start = std::chrono::steady_clock::now();
  grpc::ClientContext context;
  if (options.prepare) options.prepare(&context);
  kg::v1::ExportTriplesRequest request;
  request.set_since_sequence(options.since_sequence);
  request.set_max_page_facts(options.page_facts);
  std::unique_ptr<grpc::ClientReaderInterface<kg::v1::ExportTriplesResponse>> reader =
      stub.ExportTriples(&context, request);
  StallWatch watch(&context, std::chrono::milliseconds(options.page_timeout_ms));
  ExportSummary summary;
  kg::v1::ExportTriplesResponse page;
  absl::Status handled;
  while (reader->Read(&page)) {
    watch.Progress();
    if (page.sequences_size() != page.triples_size()) {
      handled =
          absl::InternalError(absl::StrCat("the server sent a page of ", page.triples_size(),
                                           " facts with ", page.sequences_size(), " sequences"));
    } else if (summary.pages > 0 && page.graph_sequence() != summary.graph_sequence) {
      handled =
          absl::InternalError(absl::StrCat("the server's export changed version, from ",
                                           summary.graph_sequence, " to ", page.graph_sequence()));
    } else {
      summary.graph_sequence = page.graph_sequence();
      handled = on_page(page);
    }
    if (!handled.ok()) {
      context.TryCancel();
      while (reader->Read(&page)) {
      }
      reader->Finish().ok();  // the cancellation's status; ours is what matters
      return handled;
    }
    ++summary.pages;
    summary.facts += page.triples_size();
  }
  if (grpc::Status finished = reader->Finish(); !finished.ok()) {
    if (watch.stalled()) {
      return absl::DeadlineExceededError(absl::StrCat("no page of the export arrived for ",
                                                      options.page_timeout_ms, " ms (after ",
                                                      summary.facts, " facts)"));
    }
    return ToAbslStatus(finished);
  }
  if (summary.pages == 0) {
    return absl::InternalError("the server ended the export without saying its version");
  }
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return summary;
}

absl::StatusOr<ExportSummary> ExportTriplesToFile(kg::v1::KnowledgeGraph::StubInterface& stub,
                                                  const ExportOptions& options,
                                                  const std::string& path) {
  const std::string partial = path + ".partial";
  std::FILE* out = std::fopen(partial.c_str(), "w");
  if (out == nullptr) {
    return absl::InternalError(absl::StrCat("cannot write ", partial, ": ", std::strerror(errno)));
  }
  std::string lines;
  absl::StatusOr<ExportSummary> summary =
      ExportTriples(stub, options, [&](const kg::v1::ExportTriplesResponse& page) {
        lines.clear();
        for (const kg::v1::Triple& t : page.triples()) {
          absl::StrAppend(&lines, t.head(), "\t", t.relation(), "\t", t.tail(), "\n");
        }
        if (std::fwrite(lines.data(), 1, lines.size(), out) != lines.size()) {
          return absl::InternalError(absl::StrCat("writing ", partial, ": ", std::strerror(errno)));
        }
        return absl::OkStatus();
      });
  const bool flushed = std::fflush(out) == 0 && fsync(fileno(out)) == 0;
  const int flush_errno = errno;
  std::fclose(out);
  if (summary.ok() && !flushed) {
    summary =
        absl::InternalError(absl::StrCat("writing ", partial, ": ", std::strerror(flush_errno)));
  }
  if (!summary.ok()) {
    std::remove(partial.c_str());
    return summary;
  }
  if (std::rename(partial.c_str(), path.c_str()) != 0) {
    const int rename_errno = errno;
    std::remove(partial.c_str());
    return absl::InternalError(
        absl::StrCat("renaming ", partial, " to ", path, ": ", std::strerror(rename_errno)));
  }
  return summary;
}

}  // namespace grail
