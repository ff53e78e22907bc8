#include "engine/storage_thread/cadence.hpp"

namespace surge::engine {

storage_cadence::storage_cadence(const storage_worker_config& config, bool until_drained)
    : subscriber_reload_(config.subscriber_reload_interval),
      ownership_renew_(config.ownership_renew),
      ownership_handoff_poll_(config.ownership_handoff_poll),
      new_rows_check_(config.new_rows_check_interval),
      first_count_wait_(config.first_count_wait),
      backlog_timing_{.small_backlog = config.drained_check_interval,
                      .large_backlog = config.backlog_refresh_interval,
                      .end_in_sight = until_drained ? config.end_in_sight_check_interval
                                                    : std::chrono::milliseconds(0)} {}

periodic_work storage_cadence::due(clock::time_point now, std::int64_t backlog, bool shards_idle,
                                   bool end_may_be_near) const {
  periodic_work work;
  work.reload_subscribers = now - last_reload_ >= subscriber_reload_;
  work.renew_ownership =
      now - last_renewal_ >= (handoff_awaited_ ? ownership_handoff_poll_ : ownership_renew_);
  const auto check_every = backlog_check_interval(backlog_timing_, backlog, shards_idle,
                                                  last_count_took_, end_may_be_near);
  work.count_backlog = now - last_backlog_check_ >= check_every &&
                       first_count_due(claim_answered_, now - start_, first_count_wait_);
  return work;
}

bool storage_cadence::new_rows_check_due(clock::time_point now) const {
  return new_rows_check_.count() > 0 && now - last_new_rows_check_ >= new_rows_check_;
}

}  // namespace surge::engine
