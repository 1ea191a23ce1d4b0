#include "model/core/model_archive.h"

#include <openssl/evp.h>
#include <torch/csrc/jit/runtime/operator.h>
#include <torch/version.h>

#include <cctype>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/durable_file.h"
#include "model/core/archive_check.h"
#include "model/core/archive_probe.h"
#include "model/core/torch_util.h"

namespace grail {

namespace {

constexpr char kDigestsAttribute[] = "parameter_digests";

// SHA-256 of a tensor's dtype, shape and contents, hex.
std::string TensorDigest(const torch::Tensor& tensor) {
  const torch::Tensor cpu = tensor.detach().to(torch::kCPU).contiguous();
  EVP_MD_CTX* context = EVP_MD_CTX_new();
  EVP_DigestInit_ex(context, EVP_sha256(), nullptr);
  const std::string header =
      absl::StrCat(c10::toString(cpu.scalar_type()), ":", absl::StrJoin(cpu.sizes(), ","), ":");
  EVP_DigestUpdate(context, header.data(), header.size());
  EVP_DigestUpdate(context, cpu.data_ptr(), cpu.numel() * cpu.element_size());
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_DigestFinal_ex(context, digest, &size);
  EVP_MD_CTX_free(context);
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<char*>(digest), size));
}

// "name sha256" per line, for every tensor the module holds (parameters, buffers, tensor
// attributes), in the module's order.
std::map<std::string, std::string> ParameterDigests(const torch::jit::Module& module) {
  std::map<std::string, std::string> digests;
  for (const auto& attribute : module.named_attributes(/*recurse=*/true)) {
    if (attribute.value.isTensor()) {
      digests[attribute.name] = TensorDigest(attribute.value.toTensor());
    }
  }
  return digests;
}

// `path`'s code calls the operator `op` (NS::NAME), which this process does not have: which
// one, and what to do about it.
absl::Status MissingOperatorError(const std::string& path, const std::string& op) {
  if (absl::StartsWith(op, "grail::")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot load model ", path, ": its code calls the operator ", op,
        ", which this build does not have; the archive was written by a later build: serve "
        "it with that build or a later one"));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "cannot load model ", path, ": its code calls the operator ", op, ", which LibTorch ",
      TORCH_VERSION, " here does not have; the archive was written with a later LibTorch"));
}

// Why LibTorch could not load `path`: its message, or, where the archive's code calls an
// operator of LibTorch's own this process does not have (TorchScript's "Unknown builtin op:
// NS::NAME" and a screen of source), MissingOperatorError. Those of other namespaces are
// found before LibTorch compiles anything (LoadModelArchiveBytes).
absl::Status LoadError(const std::string& path, const std::string& what) {
  const std::string kUnknown = "Unknown builtin op: ";
  const size_t at = what.find(kUnknown);
  if (at != std::string::npos) {
    const size_t begin = at + kUnknown.size();
    size_t end = begin;
    while (end < what.size() && (std::isalnum(static_cast<unsigned char>(what[end])) ||
                                 what[end] == '_' || what[end] == ':')) {
      ++end;
    }
    return MissingOperatorError(path, what.substr(begin, end - begin));
  }
  return absl::InvalidArgumentError(absl::StrCat("cannot load model ", path, ": ", what));
}

}  // namespace

absl::StatusOr<torch::jit::Module> LoadModelArchiveBytes(absl::string_view bytes,
                                                         const std::string& path,
                                                         const torch::Device& device) {
  std::set<std::string> operators;
  if (absl::Status container = CheckModelArchiveBytes(bytes, path, &operators); !container.ok()) {
    return container;
  }
  // Before TorchScript compiles the code: LibTorch 1.13 leaks the half-compiled functions when
  // it meets an operator it does not know, and names it only among a screen of source.
  for (const std::string& op : operators) {
    if (torch::jit::getAllOperatorsFor(c10::Symbol::fromQualString(op)).empty()) {
      return MissingOperatorError(path, op);
    }
  }
  torch::jit::Module module;
  try {
    ByteViewStream in(bytes);
    module = torch::jit::load(in, device);
  } catch (const c10::Error& e) {
    return LoadError(path, e.what_without_backtrace());
  } catch (const std::exception& e) {
    return LoadError(path, e.what());
  }
  // The digests its trainer wrote (archives written before them carry none): a tensor
  // altered anywhere, even with its record's CRC-32 recomputed, is refused by name. They
  // guard against damage, not forgery: whoever can write the archive can write them.
  // An empty list is no list (an archive edited outside a trainer, as tests do).
  if (module.hasattr(kDigestsAttribute) && !module.attr(kDigestsAttribute).toStringRef().empty()) {
    std::map<std::string, std::string> written;
    for (absl::string_view line :
         absl::StrSplit(module.attr(kDigestsAttribute).toStringRef(), '\n', absl::SkipEmpty())) {
      const std::pair<std::string, std::string> entry = absl::StrSplit(line, ' ');
      written[entry.first] = entry.second;
    }
    const std::map<std::string, std::string> found = ParameterDigests(module);
    for (const auto& [name, digest] : found) {
      const auto it = written.find(name);
      if (it == written.end()) {
        return absl::InvalidArgumentError(absl::StrCat(path, " is damaged: it holds a tensor ",
                                                       name, " its trainer did not write"));
      }
      if (it->second != digest) {
        return absl::InvalidArgumentError(absl::StrCat(
            path, " is damaged: tensor ", name, " differs from what its trainer wrote (SHA-256 ",
            digest.substr(0, 16), ", written ", it->second.substr(0, 16), ")"));
      }
    }
    for (const auto& [name, digest] : written) {
      if (!found.count(name)) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, " is damaged: tensor ", name, " its trainer wrote is missing"));
      }
    }
  }
  return module;
}

absl::StatusOr<torch::jit::Module> LoadModelArchive(const std::string& path,
                                                    const torch::Device& device) {
  absl::StatusOr<ModelBytes> bytes = ReadModelFile(path);
  if (!bytes.ok()) return bytes.status();
  if (absl::Status probe = ProbeInChildProcess(ArchiveKind::kModel, *bytes, path); !probe.ok()) {
    return probe;
  }
  return LoadModelArchiveBytes(bytes->view(), path, device);
}

absl::StatusOr<OpenedArchive> OpenArchive(const std::string& path, absl::string_view device) {
  absl::StatusOr<torch::Device> parsed = ParseDevice(device);
  if (!parsed.ok()) return parsed.status();
  absl::StatusOr<torch::jit::Module> module = LoadModelArchive(path, *parsed);
  if (!module.ok()) return module.status();
  return OpenedArchive{*std::move(module), *parsed};
}

std::string ArchiveFormat(const torch::jit::Module& module) {
  return module.hasattr("format") ? module.attr("format").toStringRef() : "";
}

std::vector<std::string> ArchiveRelations(const torch::jit::Module& module) {
  std::vector<std::string> relations;
  for (const c10::IValue& name : module.attr("relations").toListRef()) {
    relations.push_back(name.toStringRef());
  }
  return relations;
}

absl::Status SaveModule(torch::jit::Module& module, const std::string& path) {
  const std::string replaced_path = ReplacedPath(path);
  absl::StatusOr<PendingFile> pending = PendingFile::Create(replaced_path);
  if (!pending.ok()) {
    return absl::InternalError(
        absl::StrCat("cannot save model to ", path, ": ", pending.status().message()));
  }
  std::string error;
  try {
    module.save(pending->path());  // the same file, still locked: LibTorch truncates it
  } catch (const c10::Error& e) {
    error = e.what_without_backtrace();
  } catch (const std::exception& e) {
    error = e.what();
  }
  if (!error.empty()) {
    return absl::InternalError(absl::StrCat("cannot save model to ", path, ": ", error));
  }
  absl::Status replaced = pending->Replace(replaced_path);
  if (!replaced.ok()) {
    return absl::InternalError(
        absl::StrCat("cannot save model to ", path, ": ", replaced.message()));
  }
  return absl::OkStatus();
}

absl::Status SaveModelArchive(torch::jit::Module& module, const std::string& fingerprint,
                              const std::string& path) {
  try {
    module.setattr("training_fingerprint", fingerprint);
    std::string digests;
    for (const auto& [name, digest] : ParameterDigests(module)) {
      absl::StrAppend(&digests, name, " ", digest, "\n");
    }
    if (module.hasattr(kDigestsAttribute)) {
      module.setattr(kDigestsAttribute, digests);
    } else {
      module.register_attribute(kDigestsAttribute, c10::StringType::get(), digests);
    }
  } catch (const c10::Error& e) {
    return absl::InternalError(
        absl::StrCat("cannot save model to ", path, ": ", e.what_without_backtrace()));
  }
  return SaveModule(module, path);
}

int64_t CountParameters(const torch::jit::Module& module) {
  int64_t n = 0;
  for (const torch::Tensor& p : module.parameters()) n += p.numel();
  return n;
}

absl::Status CheckFiniteParameters(const torch::jit::Module& module, const std::string& path) {
  for (const auto& p : module.named_parameters()) {
    const int64_t bad = (~torch::isfinite(p.value)).sum().item<int64_t>();
    if (bad > 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": parameter ", p.name, " holds ", bad,
                       " NaN or Inf value(s): the training diverged or the archive is damaged"));
    }
  }
  return absl::OkStatus();
}

}  // namespace grail
