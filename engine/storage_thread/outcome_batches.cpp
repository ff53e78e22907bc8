#include "engine/storage_thread/outcome_batches.hpp"

#include <algorithm>
#include <utility>

#include "engine/storage_thread/refused_rows.hpp"

namespace surge::engine {

outcome_batches::outcome_batches(std::size_t batch_rows, std::vector<std::int64_t> deactivate,
                                 clock::time_point began)
    : full_(batch_rows), limit_(batch_rows), deactivate_(std::move(deactivate)), began_(began) {}

std::optional<outcome_batches::batch> outcome_batches::next(
    std::span<const storage::outcome> pending) {
  if (settling_) return batch{{&*settling_, 1}, {}};
  if (offset_ >= pending.size() && deactivate_.empty()) return std::nullopt;
  count_ = std::min(limit_, pending.size() - offset_);
  return batch{pending.subspan(offset_, count_), deactivate_};
}

std::span<const storage::outcome> outcome_batches::written(
    std::span<const storage::outcome> pending) {
  const auto batch = pending.subspan(offset_, count_);
  deactivate_.clear();
  offset_ += count_;
  if (limit_ == 0) limit_ = full_;
  return batch;
}

outcome_batches::refusal outcome_batches::refused(std::span<const storage::outcome> pending,
                                                  std::string_view why) {
  using kind = refusal::kind;
  if (!deactivate_.empty() && count_ > 0) {
    limit_ = 0;  // the deactivations alone first
    return {};
  }
  if (count_ == 0) {
    deactivate_.clear();
    limit_ = full_;
    return {.what = kind::deactivation_refused};
  }
  if (count_ > 1) {
    limit_ = count_ / 2;
    return {};
  }
  const auto& row = pending[offset_];
  auto reason = refused_rows::reason(why);
  if (auto dead = refused_rows::dead_letter(row, reason)) {
    settling_ = std::move(dead);
    settle_reason_ = reason;
    return {.what = kind::dead_letter, .delivery_id = row.delivery_id, .reason = std::move(reason)};
  }
  ++offset_;
  limit_ = full_;
  return {.what = kind::quarantine, .delivery_id = row.delivery_id, .reason = std::move(reason)};
}

void outcome_batches::settled() {
  settling_.reset();
  ++offset_;
  limit_ = full_;
}

bool outcome_batches::give_back(std::vector<storage::outcome>& pending,
                                std::vector<std::int64_t>& deactivate) {
  pending.erase(pending.begin(), pending.begin() + static_cast<std::ptrdiff_t>(offset_));
  pending.insert(pending.end(), held_.begin(), held_.end());
  deactivate.insert(deactivate.end(), deactivate_.begin(), deactivate_.end());
  return offset_ > 0;
}

}  // namespace surge::engine
