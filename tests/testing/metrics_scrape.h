// Reading a running server's /metrics in tests.
#ifndef GRAIL_TESTS_TESTING_METRICS_SCRAPE_H_
#define GRAIL_TESTS_TESTING_METRICS_SCRAPE_H_

#include <httplib.h>

#include <regex>
#include <string>

namespace grail {

// The body of GET /metrics on 127.0.0.1:`metrics_port`, or "" if the scrape failed.
inline std::string ScrapeMetrics(int metrics_port) {
  httplib::Client client("127.0.0.1", metrics_port);
  httplib::Result scrape = client.Get("/metrics");
  return scrape && scrape->status == 200 ? scrape->body : "";
}

// The value of the first series of the server's /metrics that matches `series` (a regex over
// the whole series name and labels, e.g. R"(grail_requests_total\{code="OK",method="GetStats"\})"),
// or -1 if there is none.
inline double ScrapedMetric(int metrics_port, const std::string& series) {
  const std::string body = "\n" + ScrapeMetrics(metrics_port);
  std::smatch m;
  if (!std::regex_search(body, m, std::regex("\n" + series + " (\\S+)"))) return -1;
  return std::stod(m[1]);
}

}  // namespace grail

#endif  // GRAIL_TESTS_TESTING_METRICS_SCRAPE_H_
