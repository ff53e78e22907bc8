#include "storage/postgres/values.hpp"

#include <bit>
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

namespace {

void append_be32(std::string& out, std::uint32_t value) {
  for (int shift = 24; shift >= 0; shift -= 8) out += static_cast<char>((value >> shift) & 0xff);
}

void append_be64(std::string& out, std::uint64_t value) {
  for (int shift = 56; shift >= 0; shift -= 8) out += static_cast<char>((value >> shift) & 0xff);
}

// PostgreSQL's float8 type, as array_recv checks the elements' type.
constexpr std::uint32_t float8_oid = 701;

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
  // array_send's layout: dimensions, a has-nulls flag, the element type, each dimension's length
  // and lower bound, then each element's length and its big-endian IEEE 754 bytes.
  std::string out;
  out.reserve(20 + values.size() * 12);
  append_be32(out, values.empty() ? 0 : 1);
  append_be32(out, 0);
  append_be32(out, float8_oid);
  if (!values.empty()) {
    append_be32(out, static_cast<std::uint32_t>(values.size()));
    append_be32(out, 1);
  }
  for (const double value : values) {
    append_be32(out, 8);
    append_be64(out, std::bit_cast<std::uint64_t>(value));
  }
  values_.emplace_back(std::move(out));
  formats_.resize(values_.size(), 0);
  formats_.back() = 1;
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
namespace {
// libpq's view of `values`: pointers into them, their lengths and formats.
struct wire_params {
  explicit wire_params(const std::vector<std::optional<std::string>>& values,
                       const std::vector<int>& value_formats)
      : pointers(values.size()), lengths(values.size(), 0), formats(value_formats) {
    formats.resize(values.size(), 0);
    for (std::size_t i = 0; i < values.size(); ++i) {
      if (!values[i]) continue;
      pointers[i] = values[i]->data();
      lengths[i] = static_cast<int>(values[i]->size());  // read for binary values only
    }
  }
  int count() const { return static_cast<int>(pointers.size()); }
  std::vector<const char*> pointers;
  std::vector<int> lengths;
  std::vector<int> formats;
};
}  // namespace

int send_query(pg_conn* conn, const std::string& sql, const params& values) {
  const wire_params wire(values.values_, values.formats_);
  return PQsendQueryParams(conn, sql.c_str(), wire.count(), nullptr, wire.pointers.data(),
                           wire.lengths.data(), wire.formats.data(), 0);
}

int send_prepared(pg_conn* conn, const std::string& name, const params& values) {
  const wire_params wire(values.values_, values.formats_);
  return PQsendQueryPrepared(conn, name.c_str(), wire.count(), wire.pointers.data(),
                             wire.lengths.data(), wire.formats.data(), 0);
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
