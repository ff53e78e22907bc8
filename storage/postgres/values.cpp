#include "storage/postgres/values.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include <libpq-fe.h>

namespace surge::storage::pg {
namespace {

std::string format_real(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "Infinity" : "-Infinity";
  char buffer[32];
  const int length = std::snprintf(buffer, sizeof buffer, "%.17g", value);
  return std::string(buffer, static_cast<std::size_t>(length));
}

void append_quoted(std::string& out, std::string_view text) {
  out += '"';
  for (const char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  out += '"';
}

}  // namespace

params& params::add(std::int64_t value) {
  values_.emplace_back(std::to_string(value));
  return *this;
}
params& params::add(double value) {
  values_.emplace_back(format_real(value));
  return *this;
}
params& params::add(std::string_view value) {
  values_.emplace_back(std::string(value));
  return *this;
}
params& params::add_null() {
  values_.emplace_back(std::nullopt);
  return *this;
}
params& params::add_array(std::span<const std::int64_t> values) {
  std::string out = "{";
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(values[i]);
  }
  values_.emplace_back(out + "}");
  return *this;
}
params& params::add_array(std::span<const double> values) {
  std::string out = "{";
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ',';
    out += format_real(values[i]);
  }
  values_.emplace_back(out + "}");
  return *this;
}
params& params::add_array(std::span<const std::string> values) {
  std::string out = "{";
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ',';
    append_quoted(out, values[i]);
  }
  values_.emplace_back(out + "}");
  return *this;
}
params& params::add_array(std::span<const std::optional<std::string>> values) {
  std::string out = "{";
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ',';
    if (values[i]) {
      append_quoted(out, *values[i]);
    } else {
      out += "NULL";
    }
  }
  values_.emplace_back(out + "}");
  return *this;
}
std::vector<const char*> params::pointers() const {
  std::vector<const char*> out;
  out.reserve(values_.size());
  for (const auto& value : values_) out.push_back(value ? value->c_str() : nullptr);
  return out;
}

result::result(pg_result* handle) : handle_(handle) {}
result::~result() {
  if (handle_) PQclear(handle_);
}
result::result(result&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
int result::rows() const { return PQntuples(handle_); }
int result::columns() const { return PQnfields(handle_); }
bool result::is_null(int row, int column) const { return PQgetisnull(handle_, row, column) != 0; }
std::string_view result::text(int row, int column) const {
  return {PQgetvalue(handle_, row, column),
          static_cast<std::size_t>(PQgetlength(handle_, row, column))};
}
std::int64_t result::int64(int row, int column) const {
  const auto value = text(row, column);
  std::int64_t out = 0;
  std::from_chars(value.data(), value.data() + value.size(), out);
  return out;
}
double result::real(int row, int column) const {
  if (is_null(row, column)) return 0;
  return std::strtod(PQgetvalue(handle_, row, column), nullptr);
}
std::int64_t result::affected() const {
  const char* count = PQcmdTuples(handle_);
  return count && *count ? std::strtoll(count, nullptr, 10) : 0;
}

}  // namespace surge::storage::pg
