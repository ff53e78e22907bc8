// The drain's storage on PostgreSQL (DESIGN section 1): claims with FOR UPDATE SKIP LOCKED under
// the same fenced leases as on SQLite, outcomes in one statement per batch, tokens from the
// persisted bucket, ownership leases for several drainers on several hosts, and LISTEN/NOTIFY
// for new rows with the idle poll as the backstop.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <unordered_map>
#include <unordered_set>

#include "proto/ownership.hpp"
#include "proto/persisted_bucket.hpp"
#include "storage/drain_store.hpp"
#include "storage/error.hpp"
#include "storage/ownership_support.hpp"
#include "storage/postgres/queue.hpp"
#include "storage/postgres/session.hpp"
#include "storage/sql_support.hpp"

namespace surge::storage {
namespace {

using pg::params;

// How soon a drainer asks again for tokens of a subscriber it does not own: about one renewal.
constexpr double not_owned_recheck_seconds = 1.0;
// Hosts' clocks differ: a drain stops claiming for its subscribers this long before its
// heartbeat runs out by its own clock, so a taker whose clock runs ahead by less than this
// never overlaps it (NTP keeps hosts within milliseconds).
constexpr double clock_skew_margin_seconds = 1.0;
// Renewals of all drainers take turns on this advisory lock, as they do on SQLite's write lock.
constexpr std::int64_t ownership_lock_key = 7318594502;
constexpr double lease_record_keep_seconds = 3600;
constexpr int claims_between_prunes = 100;
constexpr const char* new_rows_channel = "surge_new_rows";

const char* kind_word(outcome_kind kind) {
  switch (kind) {
    case outcome_kind::done: return "done";
    case outcome_kind::retry: return "retry";
    case outcome_kind::dead: return "dead";
    case outcome_kind::release: return "release";
    case outcome_kind::coalesced: return "coalesced";
  }
  return "release";
}

std::optional<std::string> text_or_null(const std::string& text) {
  if (text.empty()) return std::nullopt;
  return text;
}

// Each outcome kind sets what its SQLite statement sets (storage/outcomes.cpp); every update is
// fenced on our lease, and the ids that come back are the ones whose fence held.
constexpr const char* outcomes_sql = R"sql(
UPDATE webhook_delivery d SET
  status = CASE o.kind WHEN 'done' THEN 'done' WHEN 'coalesced' THEN 'done'
                       WHEN 'retry' THEN 'retry' WHEN 'dead' THEN 'dead' ELSE d.status END,
  attempts = CASE WHEN o.kind IN ('done', 'retry', 'dead') THEN o.attempts ELSE d.attempts END,
  next_attempt_at = CASE WHEN o.kind = 'retry' THEN o.next_at ELSE d.next_attempt_at END,
  last_status = CASE WHEN o.kind IN ('done', 'retry', 'dead') THEN o.last_status
                     ELSE d.last_status END,
  last_error = CASE WHEN o.kind = 'done' THEN NULL
                    WHEN o.kind IN ('retry', 'dead', 'coalesced') THEN o.last_error
                    ELSE d.last_error END,
  delivered_at = CASE WHEN o.kind = 'done' THEN o.finished_at ELSE d.delivered_at END,
  coalesced_into = CASE WHEN o.kind = 'coalesced' THEN o.into_id ELSE d.coalesced_into END,
  locked_until = 0
FROM unnest($1::bigint[], $2::float8[], $3::text[], $4::int[], $5::float8[], $6::int[],
            $7::text[], $8::float8[], $9::bigint[])
  AS o(id, lease, kind, attempts, next_at, last_status, last_error, finished_at, into_id)
WHERE d.id = o.id AND d.locked_until = o.lease
RETURNING d.id
)sql";

constexpr const char* attempts_sql = R"sql(
INSERT INTO surge_attempt(delivery_id, subscriber_id, attempt, started_at, finished_at,
  status_code, error_class, batch_lead, batch_size)
SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::int[], $4::float8[], $5::float8[],
                     $6::int[], $7::text[], $8::bigint[], $9::int[])
)sql";

// Oldest due first per subscriber, rows another transaction holds skipped (SKIP LOCKED): several
// drainers and the steady-state drainer claim side by side without waiting on each other.
constexpr const char* claim_sql = R"sql(
WITH picked AS (
  SELECT c.id FROM unnest($1::bigint[], $2::int[]) AS want(sid, n)
  CROSS JOIN LATERAL (
    SELECT w.id FROM webhook_delivery w
    WHERE w.subscriber_id = want.sid AND w.status IN ('pending', 'retry')
      AND w.next_attempt_at <= $3 AND w.locked_until <= $3
    ORDER BY w.next_attempt_at, w.id LIMIT want.n
    FOR UPDATE SKIP LOCKED) c)
UPDATE webhook_delivery d SET locked_until = $4 FROM picked WHERE d.id = picked.id
RETURNING d.id, d.subscriber_id, d.event_type,
  CASE WHEN octet_length(d.payload) > $5::bigint THEN '' ELSE d.payload END,
  d.attempts, d.next_attempt_at, d.created_at, octet_length(d.payload)
)sql";

bool due_order(const claimed_row& a, const claimed_row& b) {
  if (a.subscriber_id != b.subscriber_id) return a.subscriber_id < b.subscriber_id;
  if (a.next_attempt_at != b.next_attempt_at) return a.next_attempt_at < b.next_attempt_at;
  return a.id < b.id;
}

std::vector<std::int64_t> parse_ids(std::string_view text) {
  std::vector<std::int64_t> ids;
  while (!text.empty()) {
    const auto comma = text.find(',');
    const auto part = text.substr(0, comma);
    std::int64_t id = 0;
    if (std::from_chars(part.data(), part.data() + part.size(), id).ec == std::errc()) {
      ids.push_back(id);
    }
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return ids;
}

class postgres_drain_store final : public drain_store {
 public:
  explicit postgres_drain_store(const drain_store_config& config)
      : db_(config.location),
        owner_(config.owner.empty() ? default_lease_owner() : config.owner),
        allowed_(config.allowed),
        reserve_seconds_(config.token_reserve_seconds),
        heartbeat_seconds_(config.ownership_heartbeat_seconds) {
    if (pg::schema_version(db_) < pg::latest_schema_version()) {
      throw error("the PostgreSQL queue has no Surge schema (version " +
                  std::to_string(pg::schema_version(db_)) + "); run `surge migrate --db …`");
    }
    // The cycle's commit does not wait for the server's WAL flush: the queue contract's
    // durability, as SQLite's synchronous=NORMAL gives it. A server crash can lose the last
    // fraction of a second of commits; a lost claim leaves its rows due, a lost outcome leaves
    // its row leased until the lease ends and it is sent again (at-least-once holds). Producers'
    // and the steady-state drainer's transactions keep the server's setting.
    db_.set_on_connect("SET synchronous_commit = off");
    listen();
  }

  const std::string& owner() const override { return owner_; }

  cycle_result write_and_claim(std::span<const outcome> outcomes,
                               std::span<const std::int64_t> deactivate,
                               std::span<const subscriber_demand> demand, double now,
                               double lease_seconds, std::int64_t max_payload_bytes) override {
    cycle_result result;
    const bool asks_any = std::any_of(demand.begin(), demand.end(),
                                      [](const auto& d) { return d.rows > 0 || d.tokens != 0; });
    if (outcomes.empty() && deactivate.empty() && !asks_any) return result;
    pg::transaction step(db_);
    result.written = apply_outcomes(outcomes, deactivate);
    std::vector<subscriber_demand> owned;
    const double checked_at = unix_now();
    for (const auto& entry : demand) {
      if (owns(entry.subscriber_id, checked_at)) {
        owned.push_back(entry);
      } else if (entry.tokens < 0) {
        owned.push_back({.subscriber_id = entry.subscriber_id, .tokens = entry.tokens});
      } else if (entry.tokens > 0) {
        result.granted.push_back({.subscriber_id = entry.subscriber_id,
                                  .tokens = 0,
                                  .next_token_at = checked_at + not_owned_recheck_seconds});
      }
    }
    auto granted = lease_tokens(owned, now);
    result.granted.insert(result.granted.end(), granted.begin(), granted.end());
    result.claimed = claim(owned, now, lease_seconds, max_payload_bytes);
    step.commit();
    return result;
  }

  write_report write_outcomes(std::span<const outcome> outcomes,
                              std::span<const std::int64_t> deactivate) override {
    if (outcomes.empty() && deactivate.empty()) return {};
    pg::transaction step(db_);
    auto report = apply_outcomes(outcomes, deactivate);
    step.commit();
    return report;
  }

  void give_back_tokens(std::span<const unspent_tokens> tokens, double now) override {
    std::vector<subscriber_demand> returns;
    for (const auto& entry : tokens) {
      if (entry.tokens > 0) returns.push_back({.subscriber_id = entry.subscriber_id,
                                               .tokens = -entry.tokens});
    }
    if (returns.empty()) return;
    pg::transaction step(db_);
    lease_tokens(returns, now);
    step.commit();
  }

  std::vector<subscriber_row> load_subscribers(const proto::id_set& which) override {
    return pg::load_subscribers(db_, which);
  }

  // webhook_delivery.subscriber_id references webhook_subscriber here, and PostgreSQL enforces
  // it: a row of an unknown subscriber cannot exist.
  std::int64_t dead_letter_orphans(double, const proto::id_set&) override { return 0; }

  malformed_rows dead_letter_malformed(double, double lease_horizon,
                                       const proto::id_set& which) override {
    // Typed columns leave fewer ways to stall a row than on SQLite: NaN in either time, or a
    // lease beyond any lease (Infinity included) that no Surge claimer recorded.
    const auto marked = db_.exec(
        "UPDATE webhook_delivery d SET status = 'dead', locked_until = 0, last_error = "
        "CASE WHEN d.next_attempt_at = 'NaN' THEN 'malformed next_attempt_at: ' || "
        "d.next_attempt_at::text ELSE 'malformed locked_until: ' || d.locked_until::text END "
        "WHERE d.status IN ('pending', 'retry') AND " +
            detail::id_filter(which, "d.subscriber_id") +
            " AND (d.next_attempt_at = 'NaN' OR d.locked_until = 'NaN' OR "
            "(d.locked_until > $1 AND NOT EXISTS (SELECT 1 FROM surge_lease l "
            "WHERE l.lease = d.locked_until))) RETURNING d.last_error",
        params().add(lease_horizon));
    malformed_rows found;
    for (int i = 0; i < marked.rows(); ++i) {
      const auto why = marked.text(i, 0);
      if (why.starts_with("malformed next_attempt_at")) {
        ++found.next_attempt_at;
      } else if (why.ends_with("NaN")) {
        ++found.locked_until;
      } else {
        ++found.far_lease;
      }
    }
    return found;
  }

  std::int64_t count_outstanding(double now, const proto::id_set& which) override {
    return pg::count_outstanding(db_, now, which);
  }
  std::optional<double> earliest_scheduled(double now, const proto::id_set& which) override {
    return pg::earliest_scheduled(db_, now, which);
  }
  void ping() override { db_.exec("SELECT 1"); }
  bool still_in_place() override { return true; }

  new_rows check_new_rows(double) override {
    new_rows found;
    if (listening_generation_ != db_.connections()) {
      // Reconnected: the LISTEN was lost with the old connection, and so were the
      // notifications sent meanwhile.
      listen();
      found.changed = true;
      found.all = true;
      return found;
    }
    std::unordered_set<std::int64_t> ids;
    for (const auto& note : db_.take_notifications()) {
      found.changed = true;
      if (note == "*") {
        found.all = true;
        continue;
      }
      for (const auto id : parse_ids(note)) {
        if (allowed_.contains(id)) ids.insert(id);
      }
    }
    found.subscribers.assign(ids.begin(), ids.end());
    std::sort(found.subscribers.begin(), found.subscribers.end());
    return found;
  }

  ownership_change renew_ownership(double now) override;
  std::size_t owned_count(double now) const override {
    return now < claim_until() ? owned_.size() : 0;
  }
  void release_ownership() override {
    pg::transaction step(db_);
    db_.exec("UPDATE surge_owner SET drainer = '' WHERE drainer = $1", params().add(owner_));
    db_.exec("DELETE FROM surge_drainer WHERE name = $1", params().add(owner_));
    step.commit();
    owned_.clear();
    alive_until_ = 0;
    last_full_.reset();
  }
  write_counters counters() const override { return {}; }

 private:
  void listen() {
    db_.exec(std::string("LISTEN ") + new_rows_channel);
    listening_generation_ = db_.connections();
  }

  double claim_until() const { return alive_until_ - clock_skew_margin_seconds; }
  bool owns(std::int64_t id, double now) const {
    return now < claim_until() && owned_.contains(id);
  }

  write_report apply_outcomes(std::span<const outcome> batch,
                              std::span<const std::int64_t> deactivate);
  std::vector<token_grant> lease_tokens(std::span<const subscriber_demand> demand, double now);
  std::vector<claimed_row> claim(std::span<const subscriber_demand> demand, double now,
                                 double lease_seconds, std::int64_t max_payload_bytes);

  pg::session db_;
  std::string owner_;
  proto::id_set allowed_;
  double reserve_seconds_;
  double heartbeat_seconds_;
  lease_values leases_;
  int claims_until_prune_ = 0;
  std::int64_t listening_generation_ = 0;
  std::unordered_set<std::int64_t> owned_;
  double alive_until_ = 0;
  double started_at_ = 0;
  std::optional<proto::full_renewal> last_full_;
};

write_report postgres_drain_store::apply_outcomes(std::span<const outcome> batch,
                                                  std::span<const std::int64_t> deactivate) {
  write_report report;
  if (!batch.empty()) {
    std::vector<std::int64_t> ids, attempts, into;
    std::vector<double> leases, next_at, finished_at;
    std::vector<std::string> kinds;
    std::vector<std::optional<std::string>> statuses, errors;
    for (const auto& item : batch) {
      ids.push_back(item.delivery_id);
      leases.push_back(item.lease);
      kinds.emplace_back(kind_word(item.kind));
      attempts.push_back(item.attempts);
      next_at.push_back(item.next_attempt_at);
      statuses.push_back(item.last_status == 0 ? std::nullopt
                                               : std::optional(std::to_string(item.last_status)));
      errors.push_back(text_or_null(item.last_error));
      finished_at.push_back(item.finished_at);
      into.push_back(item.coalesced_into);
    }
    const auto applied = db_.exec(outcomes_sql, params()
                                                    .add_array(ids)
                                                    .add_array(leases)
                                                    .add_array(kinds)
                                                    .add_array(attempts)
                                                    .add_array(next_at)
                                                    .add_array(statuses)
                                                    .add_array(errors)
                                                    .add_array(finished_at)
                                                    .add_array(into));
    std::unordered_set<std::int64_t> held;
    for (int i = 0; i < applied.rows(); ++i) held.insert(applied.int64(i, 0));
    report.applied = static_cast<int>(held.size());
    for (const auto id : ids) {
      if (!held.contains(id)) report.lost_leases.push_back(id);
    }

    // Recorded even when the fence failed: the request was still sent and the partner saw it.
    std::vector<std::int64_t> delivery, subscriber, number, leads, sizes;
    std::vector<double> started, finished;
    std::vector<std::optional<std::string>> codes, classes, lead_ids;
    for (const auto& item : batch) {
      if (!item.has_attempt) continue;
      const auto& attempt = item.attempt;
      delivery.push_back(attempt.delivery_id);
      subscriber.push_back(attempt.subscriber_id);
      number.push_back(attempt.attempt);
      started.push_back(attempt.started_at);
      finished.push_back(attempt.finished_at);
      codes.push_back(attempt.status_code == 0
                          ? std::nullopt
                          : std::optional(std::to_string(attempt.status_code)));
      classes.push_back(text_or_null(attempt.error_class));
      lead_ids.push_back(attempt.batch_lead == 0
                             ? std::nullopt
                             : std::optional(std::to_string(attempt.batch_lead)));
      sizes.push_back(attempt.batch_size);
    }
    if (!delivery.empty()) {
      db_.exec(attempts_sql, params()
                                 .add_array(delivery)
                                 .add_array(subscriber)
                                 .add_array(number)
                                 .add_array(started)
                                 .add_array(finished)
                                 .add_array(codes)
                                 .add_array(classes)
                                 .add_array(lead_ids)
                                 .add_array(sizes));
    }
  }
  if (!deactivate.empty()) {
    db_.exec("UPDATE webhook_subscriber SET active = 0 WHERE id = ANY($1::bigint[])",
             params().add_array(deactivate));
  }
  return report;
}

std::vector<token_grant> postgres_drain_store::lease_tokens(
    std::span<const subscriber_demand> demand, double now) {
  std::vector<token_grant> grants;
  std::vector<std::int64_t> asked;
  for (const auto& entry : demand) {
    if (entry.tokens != 0) asked.push_back(entry.subscriber_id);
  }
  if (asked.empty()) return grants;
  // FOR UPDATE: the steady-state drainer reads and writes the same bucket; its update waits for
  // this transaction instead of overwriting what we took.
  const auto rows = db_.exec(
      "SELECT id, tokens, tokens_updated_at, rate_per_sec, burst FROM webhook_subscriber "
      "WHERE id = ANY($1::bigint[]) ORDER BY id FOR UPDATE",
      params().add_array(asked));
  std::unordered_map<std::int64_t, proto::persisted_bucket> buckets;
  for (int i = 0; i < rows.rows(); ++i) {
    buckets[rows.int64(i, 0)] = {.tokens = rows.real(i, 1),
                                 .updated_at = rows.real(i, 2),
                                 .rate = rows.real(i, 3),
                                 .burst = std::max(1.0, rows.real(i, 4))};
  }
  std::vector<std::int64_t> written_ids;
  std::vector<double> written_tokens;
  for (const auto& entry : demand) {
    if (entry.tokens == 0) continue;
    const auto found = buckets.find(entry.subscriber_id);
    if (entry.tokens < 0) {
      if (found == buckets.end()) continue;
      written_ids.push_back(entry.subscriber_id);
      written_tokens.push_back(proto::give_back(found->second, -entry.tokens, now));
      continue;
    }
    auto& grant = grants.emplace_back();
    grant.subscriber_id = entry.subscriber_id;
    if (found == buckets.end()) continue;
    const auto take = proto::take_tokens(found->second, entry.tokens, now, reserve_seconds_);
    grant.tokens = take.taken;
    grant.next_token_at = take.next_token_at;
    if (take.taken > 0) {
      written_ids.push_back(entry.subscriber_id);
      written_tokens.push_back(take.left);
    }
  }
  if (!written_ids.empty()) {
    db_.exec("UPDATE webhook_subscriber s SET tokens = b.tokens, tokens_updated_at = $3 "
             "FROM unnest($1::bigint[], $2::float8[]) AS b(id, tokens) WHERE s.id = b.id",
             params().add_array(written_ids).add_array(written_tokens).add(now));
  }
  return grants;
}

std::vector<claimed_row> postgres_drain_store::claim(std::span<const subscriber_demand> demand,
                                                     double now, double lease_seconds,
                                                     std::int64_t max_payload_bytes) {
  std::vector<std::int64_t> ids, counts;
  for (const auto& entry : demand) {
    if (entry.rows <= 0) continue;
    ids.push_back(entry.subscriber_id);
    counts.push_back(entry.rows);
  }
  std::vector<claimed_row> rows;
  if (ids.empty()) return rows;
  const double lease = leases_.next(now, lease_seconds);
  const auto found = db_.exec(claim_sql, params()
                                             .add_array(ids)
                                             .add_array(counts)
                                             .add(now)
                                             .add(lease)
                                             .add(max_payload_bytes));
  rows.reserve(static_cast<std::size_t>(found.rows()));
  for (int i = 0; i < found.rows(); ++i) {
    auto& row = rows.emplace_back();
    row.id = found.int64(i, 0);
    row.subscriber_id = found.int64(i, 1);
    row.event_type = found.text(i, 2);
    row.payload = found.text(i, 3);
    row.attempts = found.int64(i, 4);
    row.next_attempt_at = found.real(i, 5);
    row.created_at = found.real(i, 6);
    row.payload_bytes = found.int64(i, 7);
    row.lease = lease;
  }
  // RETURNING hands rows back in no promised order.
  std::sort(rows.begin(), rows.end(), due_order);
  if (rows.empty()) return rows;
  // Who holds the lease, for `surge stats`; rows of leases an hour past are pruned now and then.
  db_.exec("INSERT INTO surge_lease(lease, owner, claimed_at) VALUES ($1, $2, $3) "
           "ON CONFLICT (lease) DO UPDATE SET owner = excluded.owner, "
           "claimed_at = excluded.claimed_at",
           params().add(lease).add(owner_).add(now));
  if (claims_until_prune_-- <= 0) {
    claims_until_prune_ = claims_between_prunes - 1;
    db_.exec("DELETE FROM surge_lease WHERE lease < $1",
             params().add(now - lease_record_keep_seconds));
  }
  return rows;
}

ownership_change postgres_drain_store::renew_ownership(double now) {
  if (started_at_ == 0) started_at_ = now;
  const double alive_until = now + heartbeat_seconds_;
  pg::transaction step(db_);
  db_.exec("SELECT pg_advisory_xact_lock($1)", params().add(ownership_lock_key));
  db_.exec("INSERT INTO surge_drainer(name, subscribers, started_at, seen_at, expires_at) "
           "VALUES ($1, $2, $3, $4, $5) ON CONFLICT (name) DO UPDATE SET "
           "subscribers = excluded.subscribers, seen_at = excluded.seen_at, "
           "expires_at = excluded.expires_at",
           params()
               .add(owner_)
               .add(detail::selection_text(allowed_))
               .add(started_at_)
               .add(now)
               .add(alive_until));
  std::vector<proto::live_drainer> live;
  std::vector<std::string> gone;
  const auto drainers = db_.exec(
      "SELECT name, subscribers FROM surge_drainer WHERE expires_at > $1 AND expires_at <= $2 "
      "ORDER BY name",
      params().add(now).add(now + detail::max_heartbeat_seconds));
  for (int i = 0; i < drainers.rows(); ++i) {
    std::string name(drainers.text(i, 0));
    if (detail::gone_from_this_host(owner_, name)) {
      gone.push_back(std::move(name));
      continue;
    }
    live.push_back({std::move(name), detail::parse_selection(std::string(drainers.text(i, 1)))});
  }
  if (!gone.empty()) {
    db_.exec("UPDATE surge_drainer SET expires_at = $1 WHERE name = ANY($2::text[])",
             params().add(now).add_array(gone));
  }
  proto::renewal_view view{.live = std::move(live)};
  const auto fingerprint = db_.exec(
      "SELECT COUNT(*), COALESCE(MAX(id), 0), (SELECT COUNT(*) FROM surge_owner "
      "WHERE drainer = $1) FROM webhook_subscriber",
      params().add(owner_));
  view.subscriber_count = fingerprint.int64(0, 0);
  view.highest_subscriber_id = fingerprint.int64(0, 1);
  view.owned_by_self = fingerprint.int64(0, 2);
  if (proto::heartbeat_is_enough(last_full_, view, now, alive_until_,
                                 detail::full_renewal_every_seconds)) {
    step.commit();
    alive_until_ = alive_until;
    return {};
  }
  std::vector<std::int64_t> subscribers;
  const auto ids = db_.exec("SELECT id FROM webhook_subscriber ORDER BY id");
  subscribers.reserve(static_cast<std::size_t>(ids.rows()));
  for (int i = 0; i < ids.rows(); ++i) subscribers.push_back(ids.int64(i, 0));
  std::vector<proto::subscriber_owner> owners;
  const auto held = db_.exec(
      "SELECT o.subscriber_id, o.drainer, CASE WHEN d.expires_at <= $1 THEN d.expires_at "
      "ELSE 0 END FROM surge_owner o JOIN surge_drainer d ON d.name = o.drainer",
      params().add(now + detail::max_heartbeat_seconds));
  for (int i = 0; i < held.rows(); ++i) {
    owners.push_back({held.int64(i, 0), std::string(held.text(i, 1)), held.real(i, 2)});
  }
  const auto plan = proto::plan_ownership(owner_, subscribers, view.live, owners, now);
  if (!plan.take.empty()) {
    db_.exec("INSERT INTO surge_owner(subscriber_id, drainer, fence, taken_at) "
             "SELECT id, $2, 1, $3 FROM unnest($1::bigint[]) AS id "
             "ON CONFLICT (subscriber_id) DO UPDATE SET drainer = excluded.drainer, "
             "fence = surge_owner.fence + 1, taken_at = excluded.taken_at",
             params().add_array(plan.take).add(owner_).add(now));
  }
  if (!plan.release.empty()) {
    db_.exec("UPDATE surge_owner SET drainer = '' WHERE subscriber_id = ANY($1::bigint[]) "
             "AND drainer = $2",
             params().add_array(plan.release).add(owner_));
  }
  db_.exec("DELETE FROM surge_drainer WHERE expires_at < $1",
           params().add(now - detail::dead_drainer_keep_seconds));
  step.commit();

  auto change = detail::apply_plan(plan, owned_, std::move(view), now, last_full_);
  alive_until_ = alive_until;
  return change;
}

}  // namespace

std::unique_ptr<drain_store> open_postgres_drain_store(const drain_store_config& config) {
  return std::make_unique<postgres_drain_store>(config);
}

}  // namespace surge::storage
