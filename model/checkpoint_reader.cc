#include "model/checkpoint_reader.h"

#include <caffe2/serialize/inline_container.h>

#include <cstring>
#include <fstream>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace grail {
namespace {

struct Value;
using ValuePtr = std::shared_ptr<Value>;

struct Value {
  enum class Kind {
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kTuple,
    kList,
    kDict,
    kGlobal,
    kStorage,
    kTensor
  };
  Kind kind = Kind::kNone;
  int64_t integer = 0;
  double real = 0;
  std::string text;  // string; global "module name"; storage: its record key
  std::vector<ValuePtr> items;
  std::vector<std::pair<ValuePtr, ValuePtr>> entries;
  torch::Dtype dtype = torch::kFloat;  // storage
  torch::Tensor tensor;

  static ValuePtr Of(Kind kind) {
    auto v = std::make_shared<Value>();
    v->kind = kind;
    return v;
  }
};

// Storage classes torch.save names, and their element types.
bool StorageType(const std::string& global, torch::Dtype* dtype) {
  static const std::map<std::string, torch::Dtype> kTypes = {
      {"torch FloatStorage", torch::kFloat}, {"torch DoubleStorage", torch::kDouble},
      {"torch HalfStorage", torch::kHalf},   {"torch BFloat16Storage", torch::kBFloat16},
      {"torch LongStorage", torch::kLong},   {"torch IntStorage", torch::kInt},
      {"torch ShortStorage", torch::kShort}, {"torch CharStorage", torch::kChar},
      {"torch ByteStorage", torch::kByte},   {"torch BoolStorage", torch::kBool}};
  const auto it = kTypes.find(global);
  if (it == kTypes.end()) return false;
  *dtype = it->second;
  return true;
}

class Reader {
 public:
  Reader(const std::string& path, caffe2::serialize::PyTorchStreamReader& zip)
      : path_(path), zip_(zip) {}

  absl::StatusOr<ValuePtr> Run(const std::string& pickle) {
    data_ = pickle;
    pos_ = 0;
    while (true) {
      if (pos_ >= data_.size()) return Error("the pickle ends without STOP");
      const uint8_t op = static_cast<uint8_t>(data_[pos_++]);
      absl::Status s = Step(op);
      if (!s.ok()) return s;
      if (op == '.') break;
    }
    if (stack_.size() != 1) return Error("the pickle leaves no single value");
    return stack_.back();
  }

 private:
  absl::Status Error(const std::string& what) const {
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ": ", what, " (pickle offset ", pos_, ")"));
  }
  bool Take(size_t n, std::string* out) {
    if (pos_ + n > data_.size()) return false;
    *out = data_.substr(pos_, n);
    pos_ += n;
    return true;
  }
  bool TakeInt(size_t n, uint64_t* out) {
    std::string bytes;
    if (!Take(n, &bytes)) return false;
    *out = 0;
    for (size_t i = 0; i < n; ++i) *out |= uint64_t{static_cast<uint8_t>(bytes[i])} << (8 * i);
    return true;
  }
  bool Line(std::string* out) {
    const size_t end = data_.find('\n', pos_);
    if (end == std::string::npos) return false;
    *out = data_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return true;
  }
  ValuePtr Pop() {
    ValuePtr v = stack_.back();
    stack_.pop_back();
    return v;
  }
  // The values since the last MARK, which is removed.
  std::vector<ValuePtr> PopMark() {
    const size_t mark = marks_.back();
    marks_.pop_back();
    std::vector<ValuePtr> items(stack_.begin() + static_cast<int64_t>(mark), stack_.end());
    stack_.resize(mark);
    return items;
  }
  ValuePtr Int(int64_t i) {
    ValuePtr v = Value::Of(Value::Kind::kInt);
    v->integer = i;
    return v;
  }

  absl::Status Step(uint8_t op);
  absl::StatusOr<ValuePtr> Reduce(const ValuePtr& callable, const ValuePtr& args);
  absl::StatusOr<ValuePtr> Persistent(const ValuePtr& id);
  absl::StatusOr<ValuePtr> RebuildTensor(const std::vector<ValuePtr>& args);

  std::string path_;
  caffe2::serialize::PyTorchStreamReader& zip_;
  std::string data_;
  size_t pos_ = 0;
  std::vector<ValuePtr> stack_;
  std::vector<size_t> marks_;
  std::map<uint64_t, ValuePtr> memo_;
};

absl::Status Reader::Step(uint8_t op) {
  using Kind = Value::Kind;
  std::string bytes;
  uint64_t n = 0;
  auto need = [&](size_t count) -> absl::Status {
    return stack_.size() >= count ? absl::OkStatus() : Error("the pickle's stack runs short");
  };
  switch (op) {
    case 0x80:  // PROTO
      if (!Take(1, &bytes)) return Error("truncated PROTO");
      return absl::OkStatus();
    case 0x95:  // FRAME
      if (!TakeInt(8, &n)) return Error("truncated FRAME");
      return absl::OkStatus();
    case '.':  // STOP
      return absl::OkStatus();
    case '(':  // MARK
      marks_.push_back(stack_.size());
      return absl::OkStatus();
    case '}':
      stack_.push_back(Value::Of(Kind::kDict));
      return absl::OkStatus();
    case ']':
      stack_.push_back(Value::Of(Kind::kList));
      return absl::OkStatus();
    case ')':
      stack_.push_back(Value::Of(Kind::kTuple));
      return absl::OkStatus();
    case 'N':
      stack_.push_back(Value::Of(Kind::kNone));
      return absl::OkStatus();
    case 0x88:
    case 0x89: {
      ValuePtr v = Value::Of(Kind::kBool);
      v->integer = op == 0x88;
      stack_.push_back(v);
      return absl::OkStatus();
    }
    case 'K':
      if (!TakeInt(1, &n)) return Error("truncated BININT1");
      stack_.push_back(Int(static_cast<int64_t>(n)));
      return absl::OkStatus();
    case 'M':
      if (!TakeInt(2, &n)) return Error("truncated BININT2");
      stack_.push_back(Int(static_cast<int64_t>(n)));
      return absl::OkStatus();
    case 'J':
      if (!TakeInt(4, &n)) return Error("truncated BININT");
      stack_.push_back(Int(static_cast<int32_t>(static_cast<uint32_t>(n))));
      return absl::OkStatus();
    case 0x8a: {  // LONG1
      uint64_t size = 0;
      if (!TakeInt(1, &size) || size > 8 || !TakeInt(size, &n)) return Error("bad LONG1");
      int64_t value = static_cast<int64_t>(n);
      if (size > 0 && size < 8 && (n >> (8 * size - 1)) & 1) value -= int64_t{1} << (8 * size);
      stack_.push_back(Int(value));
      return absl::OkStatus();
    }
    case 'G': {  // BINFLOAT, big-endian
      if (!Take(8, &bytes)) return Error("truncated BINFLOAT");
      uint64_t bits = 0;
      for (char c : bytes) bits = bits << 8 | static_cast<uint8_t>(c);
      ValuePtr v = Value::Of(Kind::kFloat);
      std::memcpy(&v->real, &bits, sizeof(bits));
      stack_.push_back(v);
      return absl::OkStatus();
    }
    case 'X':
    case 'T':
    case 0x8c:
    case 'U': {
      const size_t width = op == 'X' || op == 'T' ? 4 : 1;
      if (!TakeInt(width, &n) || !Take(n, &bytes)) return Error("truncated string");
      ValuePtr v = Value::Of(Kind::kString);
      v->text = std::move(bytes);
      stack_.push_back(v);
      return absl::OkStatus();
    }
    case 'q':
    case 'r':
      if (!TakeInt(op == 'q' ? 1 : 4, &n)) return Error("truncated PUT");
      if (absl::Status s = need(1); !s.ok()) return s;
      memo_[n] = stack_.back();
      return absl::OkStatus();
    case 0x94:  // MEMOIZE
      if (absl::Status s = need(1); !s.ok()) return s;
      memo_[memo_.size()] = stack_.back();
      return absl::OkStatus();
    case 'h':
    case 'j': {
      if (!TakeInt(op == 'h' ? 1 : 4, &n)) return Error("truncated GET");
      const auto it = memo_.find(n);
      if (it == memo_.end()) return Error("GET of an unknown memo entry");
      stack_.push_back(it->second);
      return absl::OkStatus();
    }
    case 'c': {
      std::string module, name;
      if (!Line(&module) || !Line(&name)) return Error("truncated GLOBAL");
      ValuePtr v = Value::Of(Kind::kGlobal);
      v->text = module + " " + name;
      stack_.push_back(v);
      return absl::OkStatus();
    }
    case 't':
    case 0x85:
    case 0x86:
    case 0x87: {
      ValuePtr v = Value::Of(Kind::kTuple);
      if (op == 't') {
        if (marks_.empty()) return Error("TUPLE without MARK");
        v->items = PopMark();
      } else {
        const size_t count = op - 0x84;
        if (absl::Status s = need(count); !s.ok()) return s;
        v->items.assign(stack_.end() - static_cast<int64_t>(count), stack_.end());
        stack_.resize(stack_.size() - count);
      }
      stack_.push_back(v);
      return absl::OkStatus();
    }
    case 'a':
    case 'e': {
      std::vector<ValuePtr> items;
      if (op == 'a') {
        if (absl::Status s = need(2); !s.ok()) return s;
        items.push_back(Pop());
      } else {
        if (marks_.empty()) return Error("APPENDS without MARK");
        items = PopMark();
      }
      if (stack_.empty() || stack_.back()->kind != Kind::kList)
        return Error("APPEND to a non-list");
      for (ValuePtr& item : items) stack_.back()->items.push_back(std::move(item));
      return absl::OkStatus();
    }
    case 's':
    case 'u': {
      std::vector<ValuePtr> items;
      if (op == 's') {
        if (absl::Status s = need(3); !s.ok()) return s;
        ValuePtr value = Pop();
        items = {Pop(), value};
      } else {
        if (marks_.empty()) return Error("SETITEMS without MARK");
        items = PopMark();
      }
      if (items.size() % 2 != 0 || stack_.empty() || stack_.back()->kind != Kind::kDict) {
        return Error("SETITEM on a non-dictionary");
      }
      for (size_t i = 0; i < items.size(); i += 2) {
        stack_.back()->entries.emplace_back(items[i], items[i + 1]);
      }
      return absl::OkStatus();
    }
    case 'b': {  // BUILD: a state dict's `_metadata`, the only state a checkpoint sets
      if (absl::Status s = need(2); !s.ok()) return s;
      Pop();
      if (stack_.back()->kind != Kind::kDict) return Error("BUILD of something not a dictionary");
      return absl::OkStatus();
    }
    case 'Q': {
      if (absl::Status s = need(1); !s.ok()) return s;
      absl::StatusOr<ValuePtr> v = Persistent(Pop());
      if (!v.ok()) return v.status();
      stack_.push_back(*std::move(v));
      return absl::OkStatus();
    }
    case 'R': {
      if (absl::Status s = need(2); !s.ok()) return s;
      ValuePtr args = Pop();
      ValuePtr callable = Pop();
      absl::StatusOr<ValuePtr> v = Reduce(callable, args);
      if (!v.ok()) return v.status();
      stack_.push_back(*std::move(v));
      return absl::OkStatus();
    }
    default:
      return Error(absl::StrCat("pickle opcode 0x", absl::Hex(op),
                                " is not one a checkpoint of "
                                "tensors needs"));
  }
}

absl::StatusOr<ValuePtr> Reader::Persistent(const ValuePtr& id) {
  // ("storage", storage class, record key, location, element count)
  if (id->kind != Value::Kind::kTuple || id->items.size() != 5 || id->items[0]->text != "storage" ||
      id->items[1]->kind != Value::Kind::kGlobal || id->items[2]->kind != Value::Kind::kString ||
      id->items[4]->kind != Value::Kind::kInt) {
    return Error("a persistent id that is not a tensor storage");
  }
  ValuePtr storage = Value::Of(Value::Kind::kStorage);
  if (!StorageType(id->items[1]->text, &storage->dtype)) {
    return Error(absl::StrCat("unknown storage type ", id->items[1]->text));
  }
  storage->text = id->items[2]->text;
  storage->integer = id->items[4]->integer;
  return storage;
}

absl::StatusOr<ValuePtr> Reader::RebuildTensor(const std::vector<ValuePtr>& args) {
  // (storage, offset, size, stride, requires_grad, backward_hooks[, metadata])
  if (args.size() < 4 || args[0]->kind != Value::Kind::kStorage ||
      args[1]->kind != Value::Kind::kInt || args[2]->kind != Value::Kind::kTuple ||
      args[3]->kind != Value::Kind::kTuple || args[2]->items.size() != args[3]->items.size()) {
    return Error("a tensor whose arguments are not (storage, offset, size, stride, ...)");
  }
  const Value& storage = *args[0];
  std::vector<int64_t> size, stride;
  int64_t last = args[1]->integer;  // the largest element index the view reads
  bool empty = false;
  for (size_t i = 0; i < args[2]->items.size(); ++i) {
    if (args[2]->items[i]->kind != Value::Kind::kInt ||
        args[3]->items[i]->kind != Value::Kind::kInt || args[2]->items[i]->integer < 0 ||
        args[3]->items[i]->integer < 0) {
      return Error("a tensor with a bad size or stride");
    }
    size.push_back(args[2]->items[i]->integer);
    stride.push_back(args[3]->items[i]->integer);
    if (size.back() == 0) empty = true;
    last += (size.back() - 1) * stride.back();
  }
  const std::string record = "data/" + storage.text;
  if (!zip_.hasRecord(record)) return Error(absl::StrCat("no record ", record, " for a tensor"));
  auto [data, bytes] = zip_.getRecord(record);
  const int64_t element = static_cast<int64_t>(c10::elementSize(storage.dtype));
  if (static_cast<int64_t>(bytes) != storage.integer * element) {
    return Error(absl::StrCat("record ", record, " holds ", bytes, " bytes where its storage of ",
                              storage.integer, " elements needs ", storage.integer * element));
  }
  if (args[1]->integer < 0 || (!empty && last >= storage.integer)) {
    return Error(absl::StrCat("a tensor reads past its storage ", record));
  }
  torch::Tensor all =
      torch::from_blob(data.get(), {storage.integer}, torch::TensorOptions().dtype(storage.dtype));
  ValuePtr v = Value::Of(Value::Kind::kTensor);
  v->tensor = all.as_strided(size, stride, args[1]->integer).clone();
  return v;
}

absl::StatusOr<ValuePtr> Reader::Reduce(const ValuePtr& callable, const ValuePtr& args) {
  if (callable->kind != Value::Kind::kGlobal || args->kind != Value::Kind::kTuple) {
    return Error("a call of something not a known global");
  }
  const std::string& name = callable->text;
  if (name == "collections OrderedDict" && args->items.empty()) {
    return Value::Of(Value::Kind::kDict);
  }
  if (name == "torch._utils _rebuild_tensor_v2") return RebuildTensor(args->items);
  if (name == "torch._utils _rebuild_parameter" && !args->items.empty() &&
      args->items[0]->kind == Value::Kind::kTensor) {
    return args->items[0];
  }
  return Error(absl::StrCat("it calls ", name,
                            ", which a checkpoint of tensors does not need "
                            "(refused: no pickled code runs here)"));
}

void Collect(const ValuePtr& v, const std::string& prefix,
             std::map<std::string, torch::Tensor>* out) {
  if (v->kind == Value::Kind::kTensor) {
    (*out)[prefix] = v->tensor;
  } else if (v->kind == Value::Kind::kDict) {
    for (const auto& [key, value] : v->entries) {
      if (key->kind != Value::Kind::kString) continue;
      Collect(value, prefix.empty() ? key->text : prefix + "/" + key->text, out);
    }
  }
}

}  // namespace

absl::StatusOr<std::map<std::string, torch::Tensor>> ReadCheckpointTensors(
    const std::string& path) {
  if (!std::ifstream(path)) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  try {
    caffe2::serialize::PyTorchStreamReader zip(path);
    if (!zip.hasRecord("data.pkl")) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, " has no data.pkl: not a torch.save file"));
    }
    auto [pickle, size] = zip.getRecord("data.pkl");
    Reader reader(path, zip);
    absl::StatusOr<ValuePtr> root =
        reader.Run(std::string(static_cast<const char*>(pickle.get()), size));
    if (!root.ok()) return root.status();
    std::map<std::string, torch::Tensor> tensors;
    Collect(*root, "", &tensors);
    return tensors;
  } catch (const c10::Error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read ", path, " as a torch.save file: ", e.what_without_backtrace()));
  }
}

}  // namespace grail
