#include "server/metrics/process_metrics.h"

#include <dirent.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace grail {
namespace {

std::optional<std::string> ReadFile(const char* path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The fields of /proc/self/stat that we use (proc(5); clock ticks and pages as the kernel
// reports them).
struct ProcStat {
  uint64_t utime_ticks = 0;  // field 14
  uint64_t stime_ticks = 0;  // field 15
  uint64_t start_ticks = 0;  // field 22, since boot
  uint64_t vsize_bytes = 0;  // field 23
  uint64_t rss_pages = 0;    // field 24
};

std::optional<ProcStat> ReadProcStat() {
  const std::optional<std::string> text = ReadFile("/proc/self/stat");
  if (!text.has_value()) return std::nullopt;
  // Field 2 is the command name in parentheses and may itself hold spaces and ')': the
  // fields we want come after the last ')'.
  const size_t close = text->rfind(')');
  if (close == std::string::npos) return std::nullopt;
  const std::vector<absl::string_view> fields =
      absl::StrSplit(absl::string_view(*text).substr(close + 1), ' ', absl::SkipWhitespace());
  // fields[0] is field 3 (state), so field k is fields[k - 3].
  if (fields.size() < 22) return std::nullopt;
  ProcStat stat;
  if (!absl::SimpleAtoi(fields[14 - 3], &stat.utime_ticks) ||
      !absl::SimpleAtoi(fields[15 - 3], &stat.stime_ticks) ||
      !absl::SimpleAtoi(fields[22 - 3], &stat.start_ticks) ||
      !absl::SimpleAtoi(fields[23 - 3], &stat.vsize_bytes) ||
      !absl::SimpleAtoi(fields[24 - 3], &stat.rss_pages)) {
    return std::nullopt;
  }
  return stat;
}

// Boot time, seconds since the epoch ("btime" in /proc/stat).
std::optional<double> ReadBootTime() {
  const std::optional<std::string> text = ReadFile("/proc/stat");
  if (!text.has_value()) return std::nullopt;
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    if (!absl::ConsumePrefix(&line, "btime ")) continue;
    uint64_t seconds;
    if (absl::SimpleAtoi(line, &seconds)) return static_cast<double>(seconds);
  }
  return std::nullopt;
}

std::optional<double> CountOpenFds() {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return std::nullopt;
  // Counts the descriptor opendir holds too, as the official clients do.
  double count = 0;
  while (const dirent* entry = readdir(dir)) {
    if (entry->d_name[0] != '.') ++count;
  }
  closedir(dir);
  return count;
}

// The soft limit of "Max open files" in /proc/self/limits; +Inf for "unlimited".
std::optional<double> ReadMaxFds() {
  const std::optional<std::string> text = ReadFile("/proc/self/limits");
  if (!text.has_value()) return std::nullopt;
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    if (!absl::ConsumePrefix(&line, "Max open files")) continue;
    const std::vector<absl::string_view> columns =
        absl::StrSplit(line, ' ', absl::SkipWhitespace());
    if (columns.empty()) return std::nullopt;
    if (columns[0] == "unlimited") return std::numeric_limits<double>::infinity();
    uint64_t limit;
    if (absl::SimpleAtoi(columns[0], &limit)) return static_cast<double>(limit);
    return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace

absl::Status RegisterProcessMetrics(ScrapeTimeMetrics& metrics) {
  const long ticks_per_second = sysconf(_SC_CLK_TCK);
  const long page_bytes = sysconf(_SC_PAGESIZE);
  const std::optional<ProcStat> stat = ReadProcStat();
  const std::optional<double> boot_time = ReadBootTime();
  if (!stat.has_value() || !boot_time.has_value() || ticks_per_second <= 0 || page_bytes <= 0) {
    return absl::UnavailableError(
        "process metrics: cannot read /proc/self/stat and /proc/stat (is /proc mounted?)");
  }
  const double ticks = static_cast<double>(ticks_per_second);
  const double start_time = *boot_time + static_cast<double>(stat->start_ticks) / ticks;

  absl::Status status = metrics.AddCounter(
      "process_cpu_seconds_total", "Total user and system CPU time spent in seconds.",
      [ticks]() -> std::optional<double> {
        const std::optional<ProcStat> now = ReadProcStat();
        if (!now.has_value()) return std::nullopt;
        return static_cast<double>(now->utime_ticks + now->stime_ticks) / ticks;
      });
  if (!status.ok()) return status;
  status = metrics.AddGauge("process_resident_memory_bytes", "Resident memory size in bytes.",
                            [page_bytes]() -> std::optional<double> {
                              const std::optional<ProcStat> now = ReadProcStat();
                              if (!now.has_value()) return std::nullopt;
                              return static_cast<double>(now->rss_pages) *
                                     static_cast<double>(page_bytes);
                            });
  if (!status.ok()) return status;
  status = metrics.AddGauge("process_virtual_memory_bytes", "Virtual memory size in bytes.",
                            []() -> std::optional<double> {
                              const std::optional<ProcStat> now = ReadProcStat();
                              if (!now.has_value()) return std::nullopt;
                              return static_cast<double>(now->vsize_bytes);
                            });
  if (!status.ok()) return status;
  status = metrics.AddGauge("process_open_fds", "Number of open file descriptors.", CountOpenFds);
  if (!status.ok()) return status;
  status =
      metrics.AddGauge("process_max_fds", "Maximum number of open file descriptors.", ReadMaxFds);
  if (!status.ok()) return status;
  return metrics.AddGauge("process_start_time_seconds",
                          "Start time of the process since unix epoch in seconds.",
                          [start_time]() -> std::optional<double> { return start_time; });
}

}  // namespace grail
