// Checking a model archive's container before LibTorch reads it.
//
// A TorchScript archive is a zip file. LibTorch 1.13 reads it without checking the entries'
// CRC-32s (its miniz is built with MINIZ_DISABLE_ZIP_READER_CRC32_CHECKS) and its
// deserializer is not hardened against damaged contents: fuzzing GrailModel::Load found a
// flipped byte that made torch::jit::load crash the process (SEGV in
// torch::jit::Source::findSourceRangeThatGenerated, docs/RELIABILITY.md). CheckModelArchiveBytes
// walks the zip itself, bounds-checking every header, and verifies every entry's CRC-32
// (inflating deflated ones), so a damaged file is refused with a clear error before LibTorch
// sees a byte of it. It cannot make a crafted archive safe: TorchScript is code, and an
// archive is as trusted as a binary.
#ifndef GRAIL_MODEL_CORE_ARCHIVE_CHECK_H_
#define GRAIL_MODEL_CORE_ARCHIVE_CHECK_H_

#include <set>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace grail {

// Checks the zip container in `bytes` (the archive's whole contents; `path` names it in
// messages): the directory where LibTorch's miniz finds it (the zip64 end record whenever its
// locator precedes the end record) on one disk, every central and local header within the
// file, no entry marked as a directory, stored or deflated entries only, every entry's CRC-32
// and size, and the TorchScript entries (<dir>/data.pkl, <dir>/constants.pkl, <dir>/version).
// INVALID_ARGUMENT "PATH is not a model archive: ..." or "PATH is damaged: ..." otherwise.
// When `operators` is not null, adds to it the operators the archive's code calls outside
// LibTorch's aten and prim namespaces, as NS::NAME (grail::rspmm): the loader refuses an
// archive calling one this build lacks before TorchScript compiles a line of it.
absl::Status CheckModelArchiveBytes(absl::string_view bytes, absl::string_view path,
                                    std::set<std::string>* operators = nullptr);

// The container alone, as above, for any zip LibTorch's reader opens (a torch.save checkpoint):
// the directory, every header, stored or deflated entries, every entry's CRC-32 and size.
absl::Status CheckZipArchiveBytes(absl::string_view bytes, absl::string_view path);

}  // namespace grail

#endif  // GRAIL_MODEL_CORE_ARCHIVE_CHECK_H_
