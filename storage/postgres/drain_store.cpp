// The drain's storage on PostgreSQL: claims with FOR UPDATE SKIP LOCKED under
// the same fenced leases as on SQLite, tokens from the persisted bucket, and LISTEN/NOTIFY for
// new rows with the idle poll as the backstop. The batch's outcomes are written by
// postgres/outcomes.cpp, and the ownership leases kept by postgres/ownership.cpp.
#include <algorithm>
#include <chrono>
#include <charconv>
#include <limits>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "proto/clock.hpp"
#include "proto/persisted_bucket.hpp"
#include "storage/drain_store.hpp"
#include "storage/queue_backend.hpp"
#include "storage/error.hpp"
#include "storage/postgres/outcomes.hpp"
#include "storage/postgres/ownership.hpp"
#include "storage/postgres/queue.hpp"
#include "storage/postgres/session.hpp"
#include "storage/resume_points.hpp"
#include "storage/sql_support.hpp"

namespace surge::storage {
namespace {

using pg::params;

// How soon a drainer asks again for tokens of a subscriber it does not own: about one renewal.
constexpr double not_owned_recheck_seconds = 1.0;
// ... and of a subscriber whose row another session holds locked.
constexpr double held_recheck_seconds = 0.5;
constexpr double lease_record_keep_seconds = 3600;
constexpr int claims_between_prunes = 100;
constexpr const char* new_rows_channel = "surge_new_rows";
constexpr const char* force_generic_plans = "SET LOCAL plan_cache_mode = force_generic_plan";

// Oldest due first per subscriber, rows another transaction holds skipped (SKIP LOCKED): several
// drainers and the steady-state drainer claim side by side without waiting on each other. Each
// subscriber's seek starts after its resume point (storage/resume_points.hpp), past the rows this
// drain already holds and the finished rows' dead index entries. The picked rows go to the UPDATE
// as an array of their places in the table (ctid), which it reads directly, with no second walk
// down the primary key (a quarter of the claim's cost); joined with the CTE instead, the planner
// estimated a handful of rows and hashed the whole table for every claim. A row locked here keeps
// its place until this transaction ends; should the UPDATE not find a picked row where it was
// picked (another session changed it just before the lock), the row is left out of this claim
// and stays due, as a row SKIP LOCKED steps over. A coalescing subscriber's seek stops at its
// judged_through (storage/claims.hpp). (A ctid names a row only within one table:
// webhook_delivery is a plain table, as the shared DDL makes it, not a partitioned one.)
constexpr const char* claim_sql = R"sql(
WITH picked AS (
  SELECT c.ctid FROM unnest($1::bigint[], $2::int[], $6::float8[], $7::bigint[], $8::bigint[])
    AS want(sid, n, after_at, after_id, through)
  CROSS JOIN LATERAL (
    SELECT w.ctid FROM webhook_delivery w
    WHERE w.subscriber_id = want.sid AND w.status IN ('pending', 'retry')
      AND w.next_attempt_at <= $3 AND w.locked_until <= $3
      AND (w.next_attempt_at, w.id) > (want.after_at, want.after_id) AND w.id <= want.through
    ORDER BY w.next_attempt_at, w.id LIMIT want.n
    FOR UPDATE SKIP LOCKED) c)
UPDATE webhook_delivery d SET locked_until = $4
WHERE d.ctid = ANY (ARRAY(SELECT ctid FROM picked))
RETURNING d.id, d.subscriber_id, d.event_type,
  CASE WHEN octet_length(d.payload) > $5::bigint THEN '' ELSE d.payload END,
  d.attempts, d.next_attempt_at, d.created_at, octet_length(d.payload), d.coalesced_since, d.ctid
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
      : db_(config.location, pg::session_limits{.interrupt = config.lock_wait}),
        owner_(config.owner.empty() ? default_lease_owner() : config.owner),
        allowed_(config.allowed),
        reserve_seconds_(config.token_reserve_seconds),
        owners_(db_, owner_, config.allowed, config.ownership_heartbeat_seconds) {
    if (pg::schema_version(db_) < pg::latest_schema_version()) {
      throw error("the PostgreSQL queue has no Surge schema (version " +
                  std::to_string(pg::schema_version(db_)) + "); run `surge migrate --db …`");
    }
    // The cycle's commit waits for its WAL to be written: a claim or an outcome the drain was
    // told is committed survives a server crash. With synchronous_commit = off, the last
    // fraction of a second of commits is lost in a crash: rows the drain had sent were claimed
    // again at once, and rows whose outcomes were lost were sent again when their leases ended.
    // A server set to `off` is overridden for this session only; `local` and the standby modes
    // are kept as they are.
    db_.set_on_connect(
        "SELECT set_config('synchronous_commit', 'on', false) "
        "WHERE current_setting('synchronous_commit') = 'off'");
    check_writable();
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
    // The cycle's statements are prepared once per connection (pg::session). For a small claim
    // PostgreSQL's plan cache judges a plan made for its arrays cheaper than the generic one and
    // plans it again on every call: 250 us a claim, 11 us a delivery for a drain that claims 23
    // rows at a time. The generic plan is the same index walk per subscriber at any size. The
    // setting came with PostgreSQL 12; an older server would refuse the cycle over it.
    if (db_.server_version() >= 120000) db_.send(force_generic_plans);
    result.written = write_outcomes_within(outcomes, deactivate);
    std::vector<subscriber_demand> owned;
    const double checked_at = proto::unix_now();
    for (const auto& entry : demand) {
      if (owners_.owns(entry.subscriber_id, checked_at)) {
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
    result.held_subscribers = std::exchange(held_subscribers_, {});
    result.more_due = std::exchange(more_due_, {});
    return result;
  }

  write_report write_outcomes(std::span<const outcome> outcomes,
                              std::span<const std::int64_t> deactivate) override {
    if (outcomes.empty() && deactivate.empty()) return {};
    pg::transaction step(db_);
    auto report = write_outcomes_within(outcomes, deactivate);
    step.commit();
    return report;
  }

  void give_back_tokens(std::span<const unspent_tokens> tokens, double now) override {
    std::vector<subscriber_demand> returns;
    for (const auto& entry : tokens) {
      if (entry.tokens > 0)
        returns.push_back({.subscriber_id = entry.subscriber_id, .tokens = -entry.tokens});
    }
    if (returns.empty()) return;
    pg::transaction step(db_);
    lease_tokens(returns, now);
    step.commit();
  }

  void record_partner_quotas(std::span<const partner_quota_row> rows) override {
    pg::record_partner_quotas(db_, rows);
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
  std::string missing_file() override { return {}; }
  std::string rescue_lost_log() override { return {}; }

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

  ownership_change renew_ownership(double now) override { return owners_.renew(now); }
  std::size_t owned_count(double now) const override { return owners_.owned_count(now); }
  void release_ownership() override { owners_.release_all(); }
  write_counters counters() const override { return {}; }

 private:
  // A read-only role, a read-only default or a standby would fail every write of the drain;
  // each statement below fails at its start in those cases, whether or not it matches a row.
  void check_writable() {
    try {
      pg::transaction probe(db_);
      db_.exec(
          "UPDATE webhook_delivery SET locked_until = locked_until WHERE false; "
          "UPDATE webhook_subscriber SET tokens = tokens WHERE false; "
          "INSERT INTO surge_attempt SELECT * FROM surge_attempt WHERE false; "
          "INSERT INTO surge_lease SELECT * FROM surge_lease WHERE false; "
          "DELETE FROM surge_lease WHERE false; "
          "INSERT INTO surge_owner SELECT * FROM surge_owner WHERE false; "
          "UPDATE surge_drainer SET seen_at = seen_at WHERE false");
    } catch (const error& failure) {
      if (!is_fatal(failure)) throw;
      throw error(with_remedy(failure, db_.uri()), failure.what_kind());
    }
  }

  void listen() {
    db_.exec(std::string("LISTEN ") + new_rows_channel);
    listening_generation_ = db_.connections();
  }

  std::vector<token_grant> lease_tokens(std::span<const subscriber_demand> demand, double now);
  // Outcomes inside the caller's transaction: directly, or for a while after a direct write met
  // another session's lock, stepping over held rows.
  write_report write_outcomes_within(std::span<const outcome> outcomes,
                                     std::span<const std::int64_t> deactivate) {
    const auto now = std::chrono::steady_clock::now();
    auto mode = now < step_over_until_ ? pg::lock_mode::step_over : pg::lock_mode::direct;
    auto report = pg::apply_outcomes(db_, outcomes, deactivate, mode, &places_);
    if (mode == pg::lock_mode::step_over && now >= step_over_until_) {
      step_over_until_ = now + step_over_for;
    }
    return report;
  }
  std::vector<claimed_row> claim(std::span<const subscriber_demand> demand, double now,
                                 double lease_seconds, std::int64_t max_payload_bytes);

  pg::session db_;
  std::string owner_;
  proto::id_set allowed_;
  double reserve_seconds_;
  lease_values leases_;
  resume_points resume_;
  pg::row_places places_;  // where this drain's leased rows sit, for their outcomes
  // Until when outcomes step over held rows, after a direct write met a lock.
  std::chrono::steady_clock::time_point step_over_until_{};
  static constexpr auto step_over_for = std::chrono::seconds(5);
  int claims_until_prune_ = 0;
  std::int64_t listening_generation_ = 0;
  bucket_sharing sharing_;                      // who else spends from the buckets
  std::vector<std::int64_t> held_subscribers_;  // of the last lease_tokens, for cycle_result
  std::vector<std::int64_t> more_due_;          // of the last claim, for cycle_result
  stopped_runs stopped_runs_;                   // where ordered claims start reading
  pg::ownership_keeper owners_;                 // after db_ and owner_, which it uses
};

std::vector<token_grant> postgres_drain_store::lease_tokens(
    std::span<const subscriber_demand> demand, double now) {
  std::vector<token_grant> grants;
  std::vector<std::int64_t> asked;
  for (const auto& entry : demand) {
    if (entry.tokens != 0) asked.push_back(entry.subscriber_id);
  }
  if (asked.empty()) return grants;
  // FOR UPDATE: the steady-state drainer reads and writes the same bucket; its update waits for
  // this transaction instead of overwriting what we took. SKIP LOCKED: a subscriber row another
  // session holds (an operator's open transaction) is passed over for this cycle rather than
  // waited for, so it never holds up the other subscribers' tokens and rows.
  const auto rows = db_.exec(
      "SELECT id, tokens, tokens_updated_at, rate_per_sec, burst FROM webhook_subscriber "
      "WHERE id = ANY($1::bigint[]) ORDER BY id FOR NO KEY UPDATE SKIP LOCKED",
      params().add_array(asked));
  std::unordered_map<std::int64_t, proto::persisted_bucket> buckets;
  std::unordered_set<std::int64_t> shared;
  for (int i = 0; i < rows.rows(); ++i) {
    const auto id = rows.int64(i, 0);
    buckets[id] = {.tokens = rows.real(i, 1),
                   .updated_at = rows.real(i, 2),
                   .rate = rows.real(i, 3),
                   .burst = std::max(1.0, rows.real(i, 4))};
    if (sharing_.read(id, buckets[id].tokens, buckets[id].updated_at, now)) shared.insert(id);
  }
  std::unordered_map<std::int64_t, std::string> repairs;
  for (auto& [id, bucket] : buckets) {
    auto fixed = proto::repaired(bucket, now);
    bucket = fixed.bucket;
    if (!fixed.why.empty()) repairs[id] = std::move(fixed.why);
  }
  std::unordered_set<std::int64_t> held;
  if (buckets.size() < asked.size()) {
    // A plain read is not blocked by row locks: what exists and was not returned is held.
    const auto present = db_.exec("SELECT id FROM webhook_subscriber WHERE id = ANY($1::bigint[])",
                                  params().add_array(asked));
    for (int i = 0; i < present.rows(); ++i) {
      if (!buckets.contains(present.int64(i, 0))) held.insert(present.int64(i, 0));
    }
    held_subscribers_.assign(held.begin(), held.end());
    std::sort(held_subscribers_.begin(), held_subscribers_.end());
  }
  std::vector<std::int64_t> written_ids;
  std::vector<double> written_tokens, written_at;
  for (const auto& entry : demand) {
    if (entry.tokens == 0) continue;
    if (held.contains(entry.subscriber_id)) {
      // Asked again soon; a token given back waits for the next stop or cycle.
      if (entry.tokens > 0) {
        grants.push_back({.subscriber_id = entry.subscriber_id,
                          .tokens = 0,
                          .next_token_at = now + held_recheck_seconds});
      }
      continue;
    }
    const auto found = buckets.find(entry.subscriber_id);
    if (entry.tokens < 0) {
      if (found == buckets.end()) continue;
      written_ids.push_back(entry.subscriber_id);
      written_tokens.push_back(proto::give_back(found->second, -entry.tokens, now));
      written_at.push_back(proto::stamp_for_write(found->second, now));
      continue;
    }
    auto& grant = grants.emplace_back();
    grant.subscriber_id = entry.subscriber_id;
    if (found == buckets.end()) continue;
    grant.shared = shared.contains(entry.subscriber_id);
    const auto take =
        proto::take_tokens(found->second, entry.tokens, now,
                           grant.shared ? 0.0 : std::max(reserve_seconds_, entry.reserve_seconds));
    grant.tokens = take.taken;
    grant.next_token_at = take.next_token_at;
    if (const auto repair = repairs.find(entry.subscriber_id); repair != repairs.end()) {
      grant.repaired = repair->second;
    }
    // A repaired bucket is written back even when nothing was taken, so it is repaired once.
    if (take.taken > 0 || !grant.repaired.empty()) {
      written_ids.push_back(entry.subscriber_id);
      written_tokens.push_back(take.left);
      written_at.push_back(proto::stamp_for_write(found->second, now));
    }
  }
  for (std::size_t i = 0; i < written_ids.size(); ++i) {
    sharing_.wrote(written_ids[i], written_tokens[i], written_at[i]);
  }
  if (!written_ids.empty()) {
    db_.send(
        "UPDATE webhook_subscriber s SET tokens = b.tokens, tokens_updated_at = b.at "
        "FROM unnest($1::bigint[], $2::float8[], $3::float8[]) AS b(id, tokens, at) "
        "WHERE s.id = b.id",
        params().add_array(written_ids).add_array(written_tokens).add_array(written_at));
  }
  return grants;
}

std::vector<claimed_row> postgres_drain_store::claim(std::span<const subscriber_demand> demand,
                                                     double now, double lease_seconds,
                                                     std::int64_t max_payload_bytes) {
  more_due_.clear();
  std::vector<std::int64_t> ids, counts, after_ids, through;
  std::vector<double> after_at;
  std::vector<const subscriber_demand*> ordered;
  for (const auto& entry : demand) {
    if (entry.rows <= 0) continue;
    if (entry.order) {
      ordered.push_back(&entry);
      continue;
    }
    ids.push_back(entry.subscriber_id);
    counts.push_back(entry.rows);
    const auto from = resume_.at(entry.subscriber_id, now);
    after_at.push_back(from.next_attempt_at);
    after_ids.push_back(from.id);
    through.push_back(entry.judged_through.value_or(std::numeric_limits<std::int64_t>::max()));
  }
  std::vector<claimed_row> rows;
  if (ids.empty() && ordered.empty()) return rows;
  const double lease = leases_.next(now, lease_seconds);
  const auto found = db_.exec(claim_sql, params()
                                             .add_array(ids)
                                             .add_array(counts)
                                             .add(now)
                                             .add(lease)
                                             .add(max_payload_bytes)
                                             .add_array(after_at)
                                             .add_array(after_ids)
                                             .add_array(through));
  rows.reserve(static_cast<std::size_t>(found.rows()));
  for (int i = 0; i < found.rows(); ++i) {
    auto& row = rows.emplace_back();
    pg::read_claimed_row(found, i, 0, row);
    row.lease = lease;
    places_.leased(row.id, lease, std::string(found.text(i, 9)));
  }
  // RETURNING hands rows back in no promised order.
  std::sort(rows.begin(), rows.end(), due_order);
  // Each subscriber's rows are together now, its last one last: where its next seek starts.
  std::unordered_map<std::int64_t, std::pair<int, resume_point>> claimed;
  for (const auto& row : rows) {
    auto& [got, last] = claimed[row.subscriber_id];
    ++got;
    last = {.next_attempt_at = row.next_attempt_at, .id = row.id};
  }
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const auto found = claimed.find(ids[i]);
    resume_.after_claim(ids[i], static_cast<int>(counts[i]),
                        found == claimed.end() ? 0 : found->second.first,
                        found == claimed.end() ? resume_point{} : found->second.second, now);
  }
  // Ordered subscribers claim by their own rule (the first unfinished row of each key).
  for (const auto* entry : ordered) {
    bool more_due = false;
    auto taken =
        pg::claim_ordered(db_, *entry, now, lease, max_payload_bytes, stopped_runs_, more_due);
    if (more_due) more_due_.push_back(entry->subscriber_id);
    rows.insert(rows.end(), std::make_move_iterator(taken.begin()),
                std::make_move_iterator(taken.end()));
  }
  if (rows.empty()) return rows;
  // Who holds the lease, for `surge stats`; rows of leases an hour past are pruned now and then.
  db_.send(
      "INSERT INTO surge_lease(lease, owner, claimed_at) VALUES ($1, $2, $3) "
      "ON CONFLICT (lease) DO UPDATE SET owner = excluded.owner, "
      "claimed_at = excluded.claimed_at",
      params().add(lease).add(owner_).add(now));
  if (claims_until_prune_-- <= 0) {
    claims_until_prune_ = claims_between_prunes - 1;
    db_.send("DELETE FROM surge_lease WHERE lease < $1",
             params().add(now - lease_record_keep_seconds));
  }
  return rows;
}

}  // namespace

namespace pg {
std::unique_ptr<drain_store> open_drain_store(const drain_store_config& config) {
  return std::make_unique<postgres_drain_store>(config);
}

}  // namespace pg

}  // namespace surge::storage
