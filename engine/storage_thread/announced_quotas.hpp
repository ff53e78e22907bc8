#pragma once
// The partners' announced quotas (RateLimit headers) on their way to the database, for an
// operator's eyes rather than the drain's: only the latest per subscriber is written, at most
// once per interval, and one refused write is kept for the next unless a newer announcement
// replaces it first. At the drain's end the write is forced and, if refused, dropped. Pure
// state: the storage core performs the write and says how it went.
#include <chrono>
#include <span>
#include <vector>

#include "storage/partner_quotas.hpp"

namespace surge::engine {

class announced_quotas {
 public:
  using clock = std::chrono::steady_clock;

  explicit announced_quotas(clock::duration interval) : interval_(interval) {}

  // Announcements from the shards, in the order they were seen.
  void announced(std::vector<storage::partner_quota_row> rows);
  bool any() const { return !pending_.empty(); }
  // Whether the periodic write falls due at `now`.
  bool due(clock::time_point now) const { return any() && now - last_write_ >= interval_; }

  // The latest announcement per subscriber, taken for a write at `now`; valid until written()
  // or failed(). `forced`: the drain's last write, dropped if refused.
  std::span<const storage::partner_quota_row> take(clock::time_point now, bool forced);
  void written() { in_flight_.clear(); }
  void failed();

 private:
  clock::duration interval_;
  clock::time_point last_write_{};
  std::vector<storage::partner_quota_row> pending_;
  std::vector<storage::partner_quota_row> in_flight_;
  bool forced_ = false;
};

}  // namespace surge::engine
