// The standard Prometheus process metrics, read from /proc at scrape time (Linux only):
//   process_cpu_seconds_total       counter: user + system CPU time of the process
//   process_resident_memory_bytes   gauge: resident set size
//   process_virtual_memory_bytes    gauge: virtual memory size
//   process_open_fds                gauge: open file descriptors
//   process_max_fds                 gauge: the soft limit on open file descriptors
//   process_start_time_seconds      gauge: when the process started, seconds since the epoch
// Same names and meanings as the official clients' process collectors, so the usual
// dashboards and alerts work unchanged.
#ifndef GRAIL_SERVER_METRICS_PROCESS_METRICS_H_
#define GRAIL_SERVER_METRICS_PROCESS_METRICS_H_

#include "absl/status/status.h"
#include "server/metrics/metrics.h"

namespace grail {

// Adds the metrics above to `metrics`. Errors: UNAVAILABLE if /proc/self/stat cannot
// be read or parsed (not Linux, no /proc mounted), registering nothing; ALREADY_EXISTS if
// one of the names is taken (those registered before it stay). A value that cannot be read at some
// scrape is left out of that scrape.
absl::Status RegisterProcessMetrics(ScrapeTimeMetrics& metrics);

}  // namespace grail

#endif  // GRAIL_SERVER_METRICS_PROCESS_METRICS_H_
