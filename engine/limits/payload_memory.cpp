#include "engine/limits/payload_memory.hpp"

#include <algorithm>
#include <cmath>

namespace surge::engine {

namespace {
// The least a row is counted as weighing, for its fields besides the payload.
constexpr double least_row_weight = 64;
}  // namespace

payload_memory::payload_memory(double share_bytes, std::size_t max_row_bytes)
    : share_bytes_(share_bytes),
      max_row_bytes_(static_cast<double>(max_row_bytes)),
      bytes_per_row_(static_cast<double>(max_row_bytes)) {}

void payload_memory::hold(subscriber_payload& sub, std::int64_t bytes) {
  const bool was_heavy = static_cast<double>(sub.held_bytes) > own_floor;
  sub.held_bytes += bytes;
  held_bytes_ += bytes;
  heavy_subscribers_ += (static_cast<double>(sub.held_bytes) > own_floor) - was_heavy;
}

void payload_memory::take_row(subscriber_payload& sub, std::int64_t bytes) {
  hold(sub, bytes);
  // Each subscriber's rows are weighed on their own: one partner's large payloads must not make
  // another's small rows look large.
  const auto weight = static_cast<double>(bytes);
  sub.bytes_per_row = sub.bytes_per_row == 0 ? weight : 0.75 * sub.bytes_per_row + 0.25 * weight;
}

void payload_memory::answered(int rows, std::int64_t bytes) {
  if (rows <= 0) return;
  const double per_row = static_cast<double>(bytes) / rows;
  bytes_per_row_ = bytes_per_row_ >= max_row_bytes_ ? per_row : (bytes_per_row_ + per_row) / 2;
}

void payload_memory::asked(subscriber_payload& sub, int rows) {
  const double bytes = rows * row_weight(sub);
  sub.pending_bytes += bytes;
  pending_bytes_ += bytes;
}

void payload_memory::asked_answered(subscriber_payload& sub) {
  pending_bytes_ -= sub.pending_bytes;
  sub.pending_bytes = 0;
}

double payload_memory::free_bytes() const {
  return share_bytes_ - static_cast<double>(held_bytes_) - pending_bytes_;
}

double payload_memory::row_weight(const subscriber_payload& sub) const {
  return std::max(sub.bytes_per_row > 0 ? sub.bytes_per_row : bytes_per_row_, least_row_weight);
}

int payload_memory::rows_within(const subscriber_payload& sub, double free_bytes) const {
  const double own = static_cast<double>(sub.held_bytes) + sub.pending_bytes;
  const bool heavy = static_cast<double>(sub.held_bytes) > own_floor;
  const double even_part = share_bytes_ / (heavy_subscribers_ + (heavy ? 0 : 1));
  const double room = std::max(std::min(free_bytes, even_part - own), own_floor - own);
  const double rows = std::floor(room / row_weight(sub));
  if (held_bytes_ == 0 && pending_bytes_ <= 0) return static_cast<int>(std::clamp(rows, 1.0, 1e9));
  return static_cast<int>(std::clamp(rows, 0.0, 1e9));
}

}  // namespace surge::engine
