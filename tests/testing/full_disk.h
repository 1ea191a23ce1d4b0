// A RocksDB file system whose disk can be filled up and freed again, for tests of what the
// store does when a write meets a full disk.
#ifndef GRAIL_TESTS_TESTING_FULL_DISK_H_
#define GRAIL_TESTS_TESTING_FULL_DISK_H_

#include <atomic>
#include <memory>
#include <string>
#include <utility>

#include "rocksdb/file_system.h"

namespace grail {

// The local file system, except that while full() every append to a file fails as write(2)
// does on a full disk (ENOSPC: RocksDB's IOError "No space left on device"). Creating a file
// still works (a directory entry, no data block), and so do reads, renames and deletions.
class FullDiskFileSystem final : public rocksdb::FileSystemWrapper {
 public:
  FullDiskFileSystem() : rocksdb::FileSystemWrapper(rocksdb::FileSystem::Default()) {}

  const char* Name() const override { return "FullDiskFileSystem"; }

  void SetFull(bool full) { full_->store(full); }
  bool full() const { return full_->load(); }
  // Appends refused so far.
  int refused_appends() const { return refused_->load(); }

  rocksdb::IOStatus NewWritableFile(const std::string& name, const rocksdb::FileOptions& options,
                                    std::unique_ptr<rocksdb::FSWritableFile>* file,
                                    rocksdb::IODebugContext* debug) override {
    rocksdb::IOStatus s = target()->NewWritableFile(name, options, file, debug);
    if (s.ok()) *file = std::make_unique<File>(std::move(*file), full_, refused_, name);
    return s;
  }
  rocksdb::IOStatus ReopenWritableFile(const std::string& name, const rocksdb::FileOptions& options,
                                       std::unique_ptr<rocksdb::FSWritableFile>* file,
                                       rocksdb::IODebugContext* debug) override {
    rocksdb::IOStatus s = target()->ReopenWritableFile(name, options, file, debug);
    if (s.ok()) *file = std::make_unique<File>(std::move(*file), full_, refused_, name);
    return s;
  }
  rocksdb::IOStatus ReuseWritableFile(const std::string& name, const std::string& old_name,
                                      const rocksdb::FileOptions& options,
                                      std::unique_ptr<rocksdb::FSWritableFile>* file,
                                      rocksdb::IODebugContext* debug) override {
    rocksdb::IOStatus s = target()->ReuseWritableFile(name, old_name, options, file, debug);
    if (s.ok()) *file = std::make_unique<File>(std::move(*file), full_, refused_, name);
    return s;
  }

 private:
  static rocksdb::IOStatus NoSpace(const std::string& name) {
    return rocksdb::IOStatus::NoSpace("While appending to file: " + name,
                                      "No space left on device");
  }

  class File final : public rocksdb::FSWritableFileOwnerWrapper {
   public:
    File(std::unique_ptr<rocksdb::FSWritableFile> file, std::shared_ptr<std::atomic<bool>> full,
         std::shared_ptr<std::atomic<int>> refused, std::string name)
        : rocksdb::FSWritableFileOwnerWrapper(std::move(file)),
          full_(std::move(full)),
          refused_(std::move(refused)),
          name_(std::move(name)) {}

    rocksdb::IOStatus Append(const rocksdb::Slice& data, const rocksdb::IOOptions& options,
                             rocksdb::IODebugContext* debug) override {
      if (full_->load()) return Refuse();
      return target()->Append(data, options, debug);
    }
    rocksdb::IOStatus Append(const rocksdb::Slice& data, const rocksdb::IOOptions& options,
                             const rocksdb::DataVerificationInfo& info,
                             rocksdb::IODebugContext* debug) override {
      if (full_->load()) return Refuse();
      return target()->Append(data, options, info, debug);
    }
    rocksdb::IOStatus PositionedAppend(const rocksdb::Slice& data, uint64_t offset,
                                       const rocksdb::IOOptions& options,
                                       rocksdb::IODebugContext* debug) override {
      if (full_->load()) return Refuse();
      return target()->PositionedAppend(data, offset, options, debug);
    }
    rocksdb::IOStatus PositionedAppend(const rocksdb::Slice& data, uint64_t offset,
                                       const rocksdb::IOOptions& options,
                                       const rocksdb::DataVerificationInfo& info,
                                       rocksdb::IODebugContext* debug) override {
      if (full_->load()) return Refuse();
      return target()->PositionedAppend(data, offset, options, info, debug);
    }

   private:
    rocksdb::IOStatus Refuse() {
      refused_->fetch_add(1);
      return NoSpace(name_);
    }

    std::shared_ptr<std::atomic<bool>> full_;
    std::shared_ptr<std::atomic<int>> refused_;
    std::string name_;
  };

  std::shared_ptr<std::atomic<bool>> full_ = std::make_shared<std::atomic<bool>>(false);
  std::shared_ptr<std::atomic<int>> refused_ = std::make_shared<std::atomic<int>>(0);
};

}  // namespace grail

#endif  // GRAIL_TESTS_TESTING_FULL_DISK_H_
