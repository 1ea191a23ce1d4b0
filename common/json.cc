#include "common/json.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

namespace grail {

std::string JsonLine(const Json& value) {
  return value.dump(/*indent=*/-1, /*indent_char=*/' ', /*ensure_ascii=*/false,
                    nlohmann::json::error_handler_t::replace);
}

std::string FormatFloat(float value) {
  if (!std::isfinite(value)) return std::isnan(value) ? "nan" : (value > 0 ? "inf" : "-inf");
  char buffer[32];
  const std::to_chars_result result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, result.ptr);
}

Json JsonFloat(float value) {
  if (!std::isfinite(value)) return nullptr;
  return std::strtod(FormatFloat(value).c_str(), nullptr);
}

double RoundTo(double value, int decimals) {
  if (!std::isfinite(value)) return value;
  const double scale = std::pow(10.0, decimals);
  return std::round(value * scale) / scale;
}

}  // namespace grail
