#include "engine/shard/subscriber.hpp"

#include <algorithm>

namespace surge::engine {

subscriber_state::subscriber_state(const storage::subscriber_row& row, subscriber_settings derived,
                                   std::chrono::steady_clock::time_point now, double now_unix,
                                   const scheduler_config& config)
    : settings(std::move(derived)),
      limits(row, settings.rate, settings.burst, now, now_unix, config),
      breaker(config.circuit) {}

subscriber_settings reloaded_settings(storage::subscriber_row& row, identity_lookup identity,
                                      const subscriber_settings* before,
                                      const scheduler_config& config, core_log& log) {
  auto settings = derive_settings(row, config);
  if (settings.credentials_problem.empty()) {
    settings.identity = std::move(identity.identity);
    settings.credentials_problem = std::move(identity.problem);
  }
  // Held, not failed: without what the partner requires every attempt would be refused.
  if (!settings.credentials_problem.empty()) settings.rate = 0;
  // Unusable limits pause the subscriber (derive_settings): the bucket and everything else
  // that reads the row's limits see the pause, not the bad values.
  row.rate_per_sec = settings.rate;
  row.burst = static_cast<std::int64_t>(settings.burst);
  // Once per subscriber and value: reloads every few seconds must not repeat it.
  const std::string who = "subscriber " + std::to_string(row.id) + ": ";
  const auto said_once = [&](const std::string& was, const std::string& is,
                             const char* usable_again, const char* held) {
    if (is == was) return;
    if (is.empty()) {
      log.write(log_level::info, who + usable_again);
    } else {
      log.write(log_level::warn, who + is + held);
    }
  };
  const std::string none;
  said_once(before ? before->limits_problem : none, settings.limits_problem,
            "rate and burst are usable again; sending resumes",
            "; treated as paused: its rows stay queued and --until-drained does not wait for "
            "them");
  said_once(before ? before->credentials_problem : none, settings.credentials_problem,
            "its credentials are usable again; sending resumes",
            "; held: its rows stay queued and --until-drained does not wait for them");
  const std::string& relief_before = before ? before->relief_problem : none;
  if (settings.relief_problem != relief_before && !settings.relief_problem.empty()) {
    log.write(log_level::warn, who + settings.relief_problem);
  }
  return settings;
}

void subscriber_state::reconfigure(subscriber_settings next,
                                   std::chrono::steady_clock::time_point now) {
  // Queued behind another origin now: let the pump find its new one.
  const bool moved =
      next.target && settings.target && next.target->origin_key != settings.target->origin_key;
  if (moved) waiting_on_origin = nullptr;
  next.batch_rows = std::min(next.batch_rows, batch_fits);
  settings = std::move(next);
  limits.configure(settings.rate, settings.burst, now);
}

scheduling::pump_facts subscriber_state::own_facts(const row_checks& checks,
                                                   std::size_t max_payload_bytes,
                                                   std::chrono::steady_clock::time_point now,
                                                   double now_unix) const {
  scheduling::pump_facts facts;
  facts.has_rows = !ready.empty();
  if (!facts.has_rows) return facts;
  const auto& front = ready.front();
  facts.active = settings.active;
  facts.rate_paused = limits.bucket().paused();
  facts.unusable = !settings.unusable_reason.empty();
  // The claim left an oversized payload in the database (storage::sqlite::claimer): only its size
  // is here.
  facts.front_too_large = static_cast<std::size_t>(front.payload_bytes) > max_payload_bytes;
  facts.front_refused = !checks.refusal(front, now_unix).empty();
  facts.front_lease_too_short = checks.lease_too_short(front, now_unix);
  facts.paused_until = limits.paused_until();
  facts.circuit_blocking = breaker.blocking() && !probe_due(now);
  if (breaker.current() == circuit_breaker::state::open) {
    facts.next_probe_at = breaker.next_probe_at();
  }
  facts.in_flight = in_flight;
  facts.in_flight_cap = settings.in_flight_cap;
  facts.batching = settings.batch_rows > 1;
  if (facts.batching) facts.batch_full = batch_full(ready, batching(), checks, now_unix);
  facts.batch_wait_since = batch_wait_since;
  facts.batch_linger = settings.batch_linger;
  facts.token_wait = limits.token_wait(now);
  return facts;
}

}  // namespace surge::engine
