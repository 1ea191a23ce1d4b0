// A store's directory opened with plain RocksDB, every column family included: for tests
// that read or tamper with the bytes the store wrote (tests/store).
#ifndef GRAIL_TESTS_TESTING_RAW_STORE_H_
#define GRAIL_TESTS_TESTING_RAW_STORE_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "rocksdb/db.h"
#include "store/store_layout.h"

namespace grail {

// Opens the store's directory with plain RocksDB, every column family included, to read
// or tamper with it the way only a bug or a broken disk would.
class RawStore {
 public:
  explicit RawStore(const std::string& dir) {
    std::vector<std::string> names;
    EXPECT_TRUE(rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), dir, &names).ok());
    std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
    for (const std::string& name : names)
      descriptors.emplace_back(name, rocksdb::ColumnFamilyOptions());
    std::vector<rocksdb::ColumnFamilyHandle*> handles;
    rocksdb::Status s = rocksdb::DB::Open(rocksdb::DBOptions(), dir, descriptors, &handles, &db_);
    EXPECT_TRUE(s.ok()) << s.ToString();
    for (size_t i = 0; i < handles.size(); ++i) handles_.emplace_back(names[i], handles[i]);
  }
  ~RawStore() {
    for (auto& [name, handle] : handles_)
      db_->DestroyColumnFamilyHandle(handle).PermitUncheckedError();
    delete db_;
  }
  rocksdb::DB* db() { return db_; }
  rocksdb::ColumnFamilyHandle* family(const std::string& name) {
    for (auto& [n, handle] : handles_) {
      if (n == name) return handle;
    }
    ADD_FAILURE() << "no column family " << name;
    return nullptr;
  }
  // Every key and value of a family, in order.
  std::vector<std::pair<std::string, std::string>> Entries(const std::string& family_name) {
    rocksdb::ReadOptions read;
    read.total_order_seek = true;
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(read, family(family_name)));
    std::vector<std::pair<std::string, std::string>> entries;
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      entries.emplace_back(it->key().ToString(), it->value().ToString());
    }
    EXPECT_TRUE(it->status().ok()) << it->status().ToString();
    return entries;
  }
  // Every key of a family, in order.
  std::vector<std::string> Keys(const std::string& family_name) {
    rocksdb::ReadOptions read;
    read.total_order_seek = true;
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(read, family(family_name)));
    std::vector<std::string> keys;
    for (it->SeekToFirst(); it->Valid(); it->Next()) keys.push_back(it->key().ToString());
    return keys;
  }
  // Makes the store what an older format wrote: version 2 had no facts_by_sequence family
  // and empty facts_out values; version 1 had no removed_entities family either.
  void RewriteAsFormatVersion(uint64_t version) {
    EXPECT_TRUE(db_->DropColumnFamily(family(store_layout::kFactsBySequence)).ok());
    for (const std::string& key : Keys(store_layout::kFactsOut)) {
      EXPECT_TRUE(db_->Put(rocksdb::WriteOptions(), family(store_layout::kFactsOut), key, "").ok());
    }
    if (version == 1) {
      EXPECT_TRUE(db_->DropColumnFamily(family(store_layout::kRemovedEntities)).ok());
    }
    EXPECT_TRUE(db_->Put(rocksdb::WriteOptions(), family(store_layout::kMeta),
                         store_layout::kFormatVersionKey, store_layout::EncodeCounter(version))
                    .ok());
  }

 private:
  rocksdb::DB* db_ = nullptr;
  std::vector<std::pair<std::string, rocksdb::ColumnFamilyHandle*>> handles_;
};

}  // namespace grail

#endif  // GRAIL_TESTS_TESTING_RAW_STORE_H_
