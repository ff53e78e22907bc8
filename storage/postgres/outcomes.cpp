// Outcomes on PostgreSQL: one fenced UPDATE for the whole batch and one INSERT of its attempt
// records, each set by the same rules as on SQLite (storage/sqlite/outcomes.cpp).
#include "storage/postgres/outcomes.hpp"

#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "proto/clock.hpp"

namespace surge::storage::pg {
namespace {

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

// Each outcome kind sets what its SQLite statement sets (storage/sqlite/outcomes.cpp); every update
// is fenced on our lease. `at_places`: each row is also read at its place (the tid array $10,
// row_places), which must still hold it.
std::string outcome_update(bool at_places) {
  std::string sql = R"sql(
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
            $7::text[], $8::float8[], $9::bigint[])sql";
  sql += at_places ? ", $10::tid[])" : ")";
  sql +=
      "\n  AS o(id, lease, kind, attempts, next_at, last_status, last_error, finished_at, into_id";
  sql += at_places ? ", place)" : ")";
  sql += "\nWHERE d.id = o.id AND d.locked_until = o.lease";
  if (at_places) sql += " AND d.ctid = o.place";
  return sql;
}

// Directly: the ids that come back are the ones whose fence held. A row another session holds
// makes it wait, for the short lock timeout set around it.
const std::string& outcomes_sql() {
  static const std::string text = outcome_update(false) + "\nRETURNING d.id, true";
  return text;
}

// Directly, each row read at its place and matched by id and lease as well.
const std::string& outcomes_at_places_sql() {
  static const std::string text = outcome_update(true) + "\nRETURNING d.id, true";
  return text;
}

// Stepping over rows another session holds locked (an operator's open transaction), so one held
// row never stalls every other outcome: the result names each row taken with whether its fence
// held, and a row not named was held. Its row locks cost a WAL record each, so it is the way only
// for a while after a direct write met a lock.
const std::string& outcomes_stepping_over_sql() {
  static const std::string text =
      "WITH taken AS (SELECT id FROM webhook_delivery WHERE id = ANY($1::bigint[]) "
      "FOR UPDATE SKIP LOCKED), written AS (" +
      outcome_update(false) +
      " AND d.id IN (SELECT id FROM taken) RETURNING d.id) "
      "SELECT t.id, w.id IS NOT NULL FROM taken t LEFT JOIN written w ON w.id = t.id";
  return text;
}

// Around a direct write: a lock held by another session fails it within the short lock timeout,
// and the savepoint lets the same transaction write the batch again stepping over the held rows.
constexpr const char* direct_write_savepoint = "SAVEPOINT surge_outcomes";
constexpr const char* direct_write_lock_timeout = "SET LOCAL lock_timeout = '100ms'";

// The rows sent in place of coalesced ones stand for their history from now on (the window
// counts along the chain); a target another session holds keeps what it had.
constexpr const char* stands_for_sql = R"sql(
UPDATE webhook_delivery d SET
  coalesced_since = LEAST(COALESCE(d.coalesced_since, d.created_at), c.since)
FROM (SELECT into_id, min(since) AS since
      FROM unnest($1::bigint[], $2::float8[]) AS c(into_id, since) GROUP BY into_id) c
WHERE d.id = c.into_id AND d.id IN (
  SELECT id FROM webhook_delivery WHERE id = ANY($1::bigint[]) FOR UPDATE SKIP LOCKED)
)sql";

// Subscribers a 410 deactivates, stepping over rows another session holds.
constexpr const char* deactivate_sql = R"sql(
UPDATE webhook_subscriber SET active = 0 WHERE id IN (
  SELECT id FROM webhook_subscriber WHERE id = ANY($1::bigint[]) FOR NO KEY UPDATE SKIP LOCKED)
RETURNING id
)sql";

constexpr const char* attempts_sql = R"sql(
INSERT INTO surge_attempt(delivery_id, subscriber_id, attempt, started_at, finished_at,
  status_code, error_class, batch_lead, batch_size)
SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::int[], $4::float8[], $5::float8[],
                     $6::int[], $7::text[], $8::bigint[], $9::int[])
)sql";

}  // namespace

void row_places::leased(std::int64_t id, double lease, std::string place) {
  places_[id] = {.lease = lease, .ctid = std::move(place)};
}

std::string row_places::take(std::int64_t id, double lease) {
  const auto found = places_.find(id);
  if (found == places_.end()) return {};
  std::string place = found->second.lease == lease ? std::move(found->second.ctid) : "";
  places_.erase(found);
  return place;
}

namespace {

// The outcome statements' nine arrays, of `items`.
params outcome_values(std::span<const outcome* const> items) {
  std::vector<std::int64_t> ids, attempts, into;
  std::vector<double> leases, next_at, finished_at;
  std::vector<std::string> kinds;
  std::vector<std::optional<std::string>> statuses, errors;
  for (const auto* item : items) {
    ids.push_back(item->delivery_id);
    leases.push_back(item->lease);
    kinds.emplace_back(kind_word(item->kind));
    attempts.push_back(item->attempts);
    next_at.push_back(item->next_attempt_at);
    statuses.push_back(item->last_status == 0 ? std::nullopt
                                              : std::optional(std::to_string(item->last_status)));
    errors.push_back(text_or_null(item->last_error));
    finished_at.push_back(item->finished_at);
    into.push_back(item->coalesced_into);
  }
  params values;
  values.add_array(ids)
      .add_array(leases)
      .add_array(kinds)
      .add_array(attempts)
      .add_array(next_at)
      .add_array(statuses)
      .add_array(errors)
      .add_array(finished_at)
      .add_array(into);
  return values;
}

// A direct write: the rows with a place read there first, then the rest (and any row not found
// at its place) by id. The ids whose fence held.
std::unordered_set<std::int64_t> write_directly(session& db, std::span<const outcome> batch,
                                                row_places* places) {
  std::vector<const outcome*> placed, by_id;
  std::vector<std::string> where;
  for (const auto& item : batch) {
    auto place = places ? places->take(item.delivery_id, item.lease) : std::string();
    if (place.empty()) {
      by_id.push_back(&item);
    } else {
      placed.push_back(&item);
      where.push_back(std::move(place));
    }
  }
  std::unordered_set<std::int64_t> fenced;
  if (!placed.empty()) {
    const auto applied = db.exec(outcomes_at_places_sql(), outcome_values(placed).add_array(where));
    for (int i = 0; i < applied.rows(); ++i) fenced.insert(applied.int64(i, 0));
    for (const auto* item : placed) {
      if (!fenced.contains(item->delivery_id)) by_id.push_back(item);
    }
  }
  if (!by_id.empty()) {
    const auto applied = db.exec(outcomes_sql(), outcome_values(by_id));
    for (int i = 0; i < applied.rows(); ++i) fenced.insert(applied.int64(i, 0));
  }
  return fenced;
}

}  // namespace

write_report apply_outcomes(session& db, std::span<const outcome> batch,
                            std::span<const std::int64_t> deactivate, lock_mode& mode,
                            row_places* places) {
  write_report report;
  if (!batch.empty()) {
    std::vector<std::int64_t> ids;
    for (const auto& item : batch) ids.push_back(item.delivery_id);
    // Directly, every row is taken and those named held their fence; stepping over, the rows
    // named are the ones taken, each saying whether its fence held.
    std::unordered_set<std::int64_t> taken;
    std::unordered_set<std::int64_t> fenced;
    if (mode == lock_mode::direct) {
      // A lock timeout (busy) thrown below is taken for the outcome UPDATE's own: a queued
      // statement that could fail that way goes first, apart.
      if (!db.only_begin_queued()) db.flush();
      db.send(direct_write_savepoint);
      db.send(direct_write_lock_timeout);
      try {
        fenced = write_directly(db, batch, places);
        taken.insert(ids.begin(), ids.end());
      } catch (const error& failure) {
        if (failure.what_kind() != error::kind::busy) throw;
        // Another session holds one of these rows: the batch again, stepping over it.
        db.exec("ROLLBACK TO SAVEPOINT surge_outcomes");
        mode = lock_mode::step_over;
        fenced.clear();
      }
    }
    if (mode == lock_mode::step_over) {
      std::vector<const outcome*> all;
      for (const auto& item : batch) {
        all.push_back(&item);
        if (places) places->take(item.delivery_id, item.lease);  // written by id here
      }
      const auto applied = db.exec(outcomes_stepping_over_sql(), outcome_values(all));
      for (int i = 0; i < applied.rows(); ++i) {
        taken.insert(applied.int64(i, 0));
        if (applied.text(i, 1) == "t") fenced.insert(applied.int64(i, 0));
      }
    }
    report.applied = static_cast<int>(fenced.size());
    // Rows not written: held by another session (not taken), taken over by another drainer
    // (taken, the fence failed), or deleted (neither: written directly, a deleted row counts as
    // taken, since only its absence tells).
    std::vector<std::int64_t> unwritten;
    for (const auto id : ids) {
      if (!fenced.contains(id)) unwritten.push_back(id);
    }
    if (!unwritten.empty()) {
      // A plain read is not blocked by row locks.
      const auto present = db.exec("SELECT id FROM webhook_delivery WHERE id = ANY($1::bigint[])",
                                   params().add_array(unwritten));
      std::unordered_set<std::int64_t> still;
      for (int i = 0; i < present.rows(); ++i) still.insert(present.int64(i, 0));
      for (const auto id : unwritten) {
        if (!still.contains(id)) {
          report.lost_leases.push_back(id);
          report.deleted.push_back(id);
        } else if (taken.contains(id)) {
          report.lost_leases.push_back(id);
        } else {
          report.held_rows.push_back(id);
        }
      }
    }
    const std::unordered_set<std::int64_t> held(report.held_rows.begin(), report.held_rows.end());
    std::vector<std::int64_t> targets;
    std::vector<double> since;
    for (const auto& item : batch) {
      if (item.kind != outcome_kind::coalesced || !fenced.contains(item.delivery_id)) continue;
      targets.push_back(item.coalesced_into);
      since.push_back(item.coalesced_since);
    }
    if (!targets.empty()) db.exec(stands_for_sql, params().add_array(targets).add_array(since));
    // A dead row of an ordered subscriber whose keys stop: its key waits for the operator.
    for (const auto& item : batch) {
      if (item.kind != outcome_kind::dead || !item.stops_key ||
          !fenced.contains(item.delivery_id)) {
        continue;
      }
      const double now = proto::unix_now();
      const auto inserted = db.exec(
          "INSERT INTO surge_stopped_key(subscriber_id, order_key, delivery_id, stopped_at) "
          "VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING RETURNING 1",
          params()
              .add(item.stops_key->subscriber_id)
              .add(item.stops_key->key)
              .add(item.delivery_id)
              .add(now));
      if (inserted.rows() == 0) continue;  // stopped already
      auto stopped = *item.stops_key;
      stopped.delivery_id = item.delivery_id;
      stopped.stopped_at = now;
      report.keys_stopped.push_back(std::move(stopped));
    }

    // Recorded even when the fence failed: the request was still sent and the partner saw it. A
    // held row's record waits with its outcome.
    std::vector<std::int64_t> delivery, subscriber, number, leads, sizes;
    std::vector<double> started, finished;
    std::vector<std::optional<std::string>> codes, classes, lead_ids;
    for (const auto& item : batch) {
      if (!item.has_attempt || held.contains(item.delivery_id)) continue;
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
      // Nothing is read back: it goes to the server with the cycle's next statement.
      db.send(attempts_sql, params()
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
    const auto done = db.exec(deactivate_sql, params().add_array(deactivate));
    std::unordered_set<std::int64_t> written;
    for (int i = 0; i < done.rows(); ++i) written.insert(done.int64(i, 0));
    std::vector<std::int64_t> missing;
    for (const auto id : deactivate) {
      if (!written.contains(id)) missing.push_back(id);
    }
    if (!missing.empty()) {
      const auto present = db.exec("SELECT id FROM webhook_subscriber WHERE id = ANY($1::bigint[])",
                                   params().add_array(missing));
      for (int i = 0; i < present.rows(); ++i)
        report.held_subscribers.push_back(present.int64(i, 0));
    }
  }
  return report;
}

}  // namespace surge::storage::pg
