#include "model/core/pickle.h"

#include <cstring>
#include <functional>
#include <map>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace grail {
namespace {

using Kind = PickleValue::Kind;

class Machine {
 public:
  Machine(absl::string_view data, absl::string_view name) : data_(data), name_(name) {}

  absl::StatusOr<PickleValuePtr> Run() {
    for (;;) {
      if (pos_ >= data_.size()) return Error("the pickle ends without STOP");
      const uint8_t op = static_cast<uint8_t>(data_[pos_++]);
      if (op == '.') break;
      if (absl::Status s = Step(op); !s.ok()) return s;
    }
    if (stack_.size() != 1 || !marks_.empty()) return Error("the pickle leaves no single value");
    return stack_.back();
  }

 private:
  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat(name_, ": ", what, " (pickle offset ", pos_, ")"));
  }
  bool Take(uint64_t n, absl::string_view* out) {
    if (n > data_.size() - pos_) return false;
    *out = data_.substr(pos_, n);
    pos_ += n;
    return true;
  }
  bool TakeInt(size_t n, uint64_t* out) {
    absl::string_view bytes;
    if (!Take(n, &bytes)) return false;
    *out = 0;
    for (size_t i = 0; i < n; ++i) *out |= uint64_t{static_cast<uint8_t>(bytes[i])} << (8 * i);
    return true;
  }
  bool Line(std::string* out) {
    const size_t end = data_.find('\n', pos_);
    if (end == absl::string_view::npos) return false;
    *out = std::string(data_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return true;
  }
  absl::Status Need(size_t count) const {
    const size_t floor = marks_.empty() ? 0 : marks_.back();
    return stack_.size() >= floor + count ? absl::OkStatus()
                                          : Error("the pickle's stack runs short");
  }
  PickleValuePtr Pop() {
    PickleValuePtr v = std::move(stack_.back());
    stack_.pop_back();
    return v;
  }
  absl::StatusOr<std::vector<PickleValuePtr>> PopMark() {
    if (marks_.empty()) return Error("an opcode that needs a MARK without one");
    const size_t mark = marks_.back();
    marks_.pop_back();
    std::vector<PickleValuePtr> items(stack_.begin() + static_cast<int64_t>(mark), stack_.end());
    stack_.resize(mark);
    return items;
  }
  void Push(PickleValuePtr v) { stack_.push_back(std::move(v)); }
  void PushInt(Kind kind, int64_t i) {
    PickleValuePtr v = PickleValue::Of(kind);
    v->integer = i;
    Push(std::move(v));
  }
  void PushText(Kind kind, std::string text) {
    PickleValuePtr v = PickleValue::Of(kind);
    v->text = std::move(text);
    Push(std::move(v));
  }
  absl::Status Pair(Kind kind) {  // REDUCE, NEWOBJ: callable, arguments
    if (absl::Status s = Need(2); !s.ok()) return s;
    PickleValuePtr v = PickleValue::Of(kind);
    PickleValuePtr args = Pop();
    v->items = {Pop(), std::move(args)};
    Push(std::move(v));
    return absl::OkStatus();
  }

  absl::Status Step(uint8_t op);

  const absl::string_view data_;
  const absl::string_view name_;
  size_t pos_ = 0;
  std::vector<PickleValuePtr> stack_;
  std::vector<size_t> marks_;
  std::map<uint64_t, PickleValuePtr> memo_;
};

absl::Status Machine::Step(uint8_t op) {
  absl::string_view bytes;
  uint64_t n = 0;
  switch (op) {
    case 0x80:  // PROTO
      return TakeInt(1, &n) ? absl::OkStatus() : Error("truncated PROTO");
    case 0x95:  // FRAME
      return TakeInt(8, &n) ? absl::OkStatus() : Error("truncated FRAME");
    case '(':  // MARK
      marks_.push_back(stack_.size());
      return absl::OkStatus();
    case '}':
      Push(PickleValue::Of(Kind::kDict));
      return absl::OkStatus();
    case ']':
      Push(PickleValue::Of(Kind::kList));
      return absl::OkStatus();
    case ')':
      Push(PickleValue::Of(Kind::kTuple));
      return absl::OkStatus();
    case 'N':
      Push(PickleValue::Of(Kind::kNone));
      return absl::OkStatus();
    case 0x88:  // NEWTRUE
    case 0x89:  // NEWFALSE
      PushInt(Kind::kBool, op == 0x88);
      return absl::OkStatus();
    case 'K':  // BININT1
    case 'M':  // BININT2
      if (!TakeInt(op == 'K' ? 1 : 2, &n)) return Error("truncated BININT");
      PushInt(Kind::kInt, static_cast<int64_t>(n));
      return absl::OkStatus();
    case 'J':  // BININT
      if (!TakeInt(4, &n)) return Error("truncated BININT");
      PushInt(Kind::kInt, static_cast<int32_t>(static_cast<uint32_t>(n)));
      return absl::OkStatus();
    case 0x8a: {  // LONG1
      uint64_t size = 0;
      if (!TakeInt(1, &size) || size > 8 || !TakeInt(size, &n)) return Error("bad LONG1");
      int64_t value = static_cast<int64_t>(n);
      if (size > 0 && size < 8 && (n >> (8 * size - 1)) & 1) value -= int64_t{1} << (8 * size);
      PushInt(Kind::kInt, value);
      return absl::OkStatus();
    }
    case 'G': {  // BINFLOAT, big-endian
      if (!Take(8, &bytes)) return Error("truncated BINFLOAT");
      uint64_t bits = 0;
      for (char c : bytes) bits = bits << 8 | static_cast<uint8_t>(c);
      PickleValuePtr v = PickleValue::Of(Kind::kFloat);
      std::memcpy(&v->real, &bits, sizeof(bits));
      Push(std::move(v));
      return absl::OkStatus();
    }
    case 'X':     // BINUNICODE
    case 'T':     // BINSTRING
    case 'B':     // BINBYTES
    case 0x8c:    // SHORT_BINUNICODE
    case 'U':     // SHORT_BINSTRING
    case 'C':     // SHORT_BINBYTES
    case 0x8d:    // BINUNICODE8
    case 0x8e: {  // BINBYTES8
      const size_t width = op == 0x8d || op == 0x8e               ? 8
                           : op == 0x8c || op == 'U' || op == 'C' ? 1
                                                                  : 4;
      if (!TakeInt(width, &n) || !Take(n, &bytes)) return Error("truncated string");
      PushText(Kind::kString, std::string(bytes));
      return absl::OkStatus();
    }
    case 'q':  // BINPUT
    case 'r':  // LONG_BINPUT
      if (!TakeInt(op == 'q' ? 1 : 4, &n)) return Error("truncated PUT");
      if (absl::Status s = Need(1); !s.ok()) return s;
      memo_[n] = stack_.back();
      return absl::OkStatus();
    case 0x94:  // MEMOIZE
      if (absl::Status s = Need(1); !s.ok()) return s;
      memo_[memo_.size()] = stack_.back();
      return absl::OkStatus();
    case 'h':    // BINGET
    case 'j': {  // LONG_BINGET
      if (!TakeInt(op == 'h' ? 1 : 4, &n)) return Error("truncated GET");
      const auto it = memo_.find(n);
      if (it == memo_.end()) return Error("GET of an unknown memo entry");
      Push(it->second);
      return absl::OkStatus();
    }
    case 'c': {  // GLOBAL
      std::string module, name;
      if (!Line(&module) || !Line(&name)) return Error("truncated GLOBAL");
      PushText(Kind::kGlobal, absl::StrCat(module, " ", name));
      return absl::OkStatus();
    }
    case 0x93: {  // STACK_GLOBAL
      if (absl::Status s = Need(2); !s.ok()) return s;
      PickleValuePtr name = Pop(), module = Pop();
      if (!module->is(Kind::kString) || !name->is(Kind::kString)) {
        return Error("STACK_GLOBAL of something not two strings");
      }
      PushText(Kind::kGlobal, absl::StrCat(module->text, " ", name->text));
      return absl::OkStatus();
    }
    case 't':     // TUPLE
    case 0x85:    // TUPLE1
    case 0x86:    // TUPLE2
    case 0x87: {  // TUPLE3
      PickleValuePtr v = PickleValue::Of(Kind::kTuple);
      if (op == 't') {
        absl::StatusOr<std::vector<PickleValuePtr>> items = PopMark();
        if (!items.ok()) return items.status();
        v->items = *std::move(items);
      } else {
        const size_t count = op - 0x84;
        if (absl::Status s = Need(count); !s.ok()) return s;
        v->items.assign(stack_.end() - static_cast<int64_t>(count), stack_.end());
        stack_.resize(stack_.size() - count);
      }
      Push(std::move(v));
      return absl::OkStatus();
    }
    case 'a':    // APPEND
    case 'e': {  // APPENDS
      std::vector<PickleValuePtr> items;
      if (op == 'a') {
        if (absl::Status s = Need(2); !s.ok()) return s;
        items.push_back(Pop());
      } else {
        absl::StatusOr<std::vector<PickleValuePtr>> popped = PopMark();
        if (!popped.ok()) return popped.status();
        items = *std::move(popped);
      }
      if (stack_.empty() || !stack_.back()->is(Kind::kList)) return Error("APPEND to a non-list");
      for (PickleValuePtr& item : items) stack_.back()->items.push_back(std::move(item));
      return absl::OkStatus();
    }
    case 's':    // SETITEM
    case 'u': {  // SETITEMS
      std::vector<PickleValuePtr> items;
      if (op == 's') {
        if (absl::Status s = Need(3); !s.ok()) return s;
        PickleValuePtr value = Pop();
        items = {Pop(), std::move(value)};
      } else {
        absl::StatusOr<std::vector<PickleValuePtr>> popped = PopMark();
        if (!popped.ok()) return popped.status();
        items = *std::move(popped);
      }
      // Python calls obj[key] = value: a dict, or an object of a mapping class (an
      // OrderedDict is a call of its class), whose entries are kept the same way.
      if (items.size() % 2 != 0 || stack_.empty() ||
          !(stack_.back()->is(Kind::kDict) || stack_.back()->is(Kind::kCall) ||
            stack_.back()->is(Kind::kObject))) {
        return Error("SETITEM on a non-dictionary");
      }
      for (size_t i = 0; i < items.size(); i += 2) {
        stack_.back()->entries.emplace_back(items[i], items[i + 1]);
      }
      return absl::OkStatus();
    }
    case 'b': {  // BUILD
      if (absl::Status s = Need(2); !s.ok()) return s;
      PickleValuePtr state = Pop();
      PickleValue& target = *stack_.back();
      if (target.is(Kind::kCall) || target.is(Kind::kObject)) {
        target.state = std::move(state);
      } else if (!target.is(Kind::kDict)) {  // a state dict's `_metadata`: dropped
        return Error("BUILD of something not an object");
      }
      return absl::OkStatus();
    }
    case 'Q': {  // BINPERSID
      if (absl::Status s = Need(1); !s.ok()) return s;
      PickleValuePtr v = PickleValue::Of(Kind::kPersistent);
      v->items = {Pop()};
      Push(std::move(v));
      return absl::OkStatus();
    }
    case 'R':  // REDUCE
      return Pair(Kind::kCall);
    case 0x81:  // NEWOBJ
      return Pair(Kind::kObject);
    case '0':  // POP
      if (absl::Status s = Need(1); !s.ok()) return s;
      Pop();
      return absl::OkStatus();
    case '1': {  // POP_MARK
      absl::StatusOr<std::vector<PickleValuePtr>> popped = PopMark();
      return popped.ok() ? absl::OkStatus() : popped.status();
    }
    case '2':  // DUP
      if (absl::Status s = Need(1); !s.ok()) return s;
      Push(stack_.back());
      return absl::OkStatus();
    default:
      return Error(absl::StrCat("pickle opcode 0x", absl::Hex(op), " is not read here"));
  }
}

absl::Status Visit(const PickleValuePtr& v, int depth,
                   const std::function<absl::Status(const PickleValue&)>& visit,
                   absl::flat_hash_set<const PickleValue*>& seen) {
  if (v == nullptr || !seen.insert(v.get()).second) return absl::OkStatus();
  if (depth > kMaxPickleDepth) {
    return absl::InvalidArgumentError(
        absl::StrCat("the pickle nests values deeper than ", kMaxPickleDepth));
  }
  if (absl::Status s = visit(*v); !s.ok()) return s;
  for (const PickleValuePtr& item : v->items) {
    if (absl::Status s = Visit(item, depth + 1, visit, seen); !s.ok()) return s;
  }
  for (const auto& [key, value] : v->entries) {
    if (absl::Status s = Visit(key, depth + 1, visit, seen); !s.ok()) return s;
    if (absl::Status s = Visit(value, depth + 1, visit, seen); !s.ok()) return s;
  }
  return Visit(v->state, depth + 1, visit, seen);
}

}  // namespace

absl::Status VisitPickle(const PickleValuePtr& root,
                         const std::function<absl::Status(const PickleValue&)>& visit) {
  absl::flat_hash_set<const PickleValue*> seen;
  return Visit(root, 0, visit, seen);
}

absl::StatusOr<PickleValuePtr> ParsePickle(absl::string_view pickle, absl::string_view name) {
  return Machine(pickle, name).Run();
}

std::optional<PickleStorageType> StorageTypeOf(absl::string_view global) {
  static const auto* const kTypes = new std::map<std::string, PickleStorageType, std::less<>>{
      {"torch FloatStorage", {"Float", 4}}, {"torch DoubleStorage", {"Double", 8}},
      {"torch HalfStorage", {"Half", 2}},   {"torch BFloat16Storage", {"BFloat16", 2}},
      {"torch LongStorage", {"Long", 8}},   {"torch IntStorage", {"Int", 4}},
      {"torch ShortStorage", {"Short", 2}}, {"torch CharStorage", {"Char", 1}},
      {"torch ByteStorage", {"Byte", 1}},   {"torch BoolStorage", {"Bool", 1}}};
  const auto it = kTypes->find(global);
  if (it == kTypes->end()) return std::nullopt;
  return it->second;
}

absl::StatusOr<PickleStorage> StorageOf(const PickleValue& id) {
  const auto bad = [](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("a tensor storage ", why));
  };
  if (!id.is(Kind::kTuple) || id.items.size() != 5 || id.items[0]->text != "storage" ||
      !id.items[1]->is(Kind::kGlobal) || !id.items[2]->is(Kind::kString) ||
      !id.items[4]->is(Kind::kInt)) {
    return bad("whose id is not (\"storage\", type, key, location, elements)");
  }
  std::optional<PickleStorageType> type = StorageTypeOf(id.items[1]->text);
  if (!type) return bad(absl::StrCat("of unknown type ", id.items[1]->text));
  if (id.items[4]->integer < 0) return bad("of a negative size");
  return PickleStorage{id.items[2]->text, *type, id.items[4]->integer};
}

absl::StatusOr<PickleTensorView> TensorViewOf(const std::vector<PickleValuePtr>& args,
                                              int64_t storage_elements) {
  if (args.size() < 4 || !args[1]->is(Kind::kInt) || !args[2]->is(Kind::kTuple) ||
      !args[3]->is(Kind::kTuple) || args[2]->items.size() != args[3]->items.size()) {
    return absl::InvalidArgumentError(
        "a tensor whose arguments are not (storage, offset, size, stride, ...)");
  }
  PickleTensorView view;
  view.offset = args[1]->integer;
  // The largest element index the view reads, in 128 bits: a damaged size cannot overflow it.
  constexpr int64_t kBound = int64_t{1} << 48;
  __int128 last = view.offset;
  bool empty = false;
  for (size_t i = 0; i < args[2]->items.size(); ++i) {
    const PickleValue& size = *args[2]->items[i];
    const PickleValue& stride = *args[3]->items[i];
    if (!size.is(Kind::kInt) || !stride.is(Kind::kInt) || size.integer < 0 || stride.integer < 0 ||
        size.integer > kBound || stride.integer > kBound) {
      return absl::InvalidArgumentError("a tensor with a bad size or stride");
    }
    view.size.push_back(size.integer);
    view.stride.push_back(stride.integer);
    if (size.integer == 0) empty = true;
    if (size.integer > 0) last += static_cast<__int128>(size.integer - 1) * stride.integer;
  }
  if (view.offset < 0 || (!empty && last >= storage_elements)) {
    return absl::InvalidArgumentError(absl::StrCat("a tensor reads element ",
                                                   static_cast<double>(last), " of a storage of ",
                                                   storage_elements, " elements"));
  }
  return view;
}

}  // namespace grail
