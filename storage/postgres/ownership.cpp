// Ownership leases on PostgreSQL: the same plan as on SQLite
// (proto/ownership.hpp), with renewals of all drainers taking turns on an advisory lock.
#include "storage/postgres/ownership.hpp"

#include <string>
#include <utility>
#include <vector>

#include "storage/ownership_support.hpp"

namespace surge::storage::pg {
namespace {

// Hosts' clocks differ: a drain stops claiming for its subscribers this long before its
// heartbeat runs out by its own clock, so a taker whose clock runs ahead by less than this
// never overlaps it (NTP keeps hosts within milliseconds).
constexpr double clock_skew_margin_seconds = 1.0;
// Renewals of all drainers take turns on this advisory lock, as they do on SQLite's write lock.
constexpr std::int64_t ownership_lock_key = 7318594502;

}  // namespace

ownership_keeper::ownership_keeper(session& db, std::string owner, proto::id_set allowed,
                                   double heartbeat_seconds)
    : db_(db),
      owner_(std::move(owner)),
      allowed_(std::move(allowed)),
      heartbeat_seconds_(heartbeat_seconds) {}

double ownership_keeper::claim_until() const { return alive_until_ - clock_skew_margin_seconds; }

bool ownership_keeper::owns(std::int64_t id, double now) const {
  return now < claim_until() && owned_.contains(id);
}

std::size_t ownership_keeper::owned_count(double now) const {
  return now < claim_until() ? owned_.size() : 0;
}

void ownership_keeper::release_all() {
  transaction step(db_);
  db_.exec("UPDATE surge_owner SET drainer = '' WHERE drainer = $1", params().add(owner_));
  db_.exec("DELETE FROM surge_drainer WHERE name = $1", params().add(owner_));
  step.commit();
  owned_.clear();
  alive_until_ = 0;
  last_full_.reset();
}

ownership_change ownership_keeper::renew(double now) {
  if (started_at_ == 0) started_at_ = now;
  const double alive_until = now + heartbeat_seconds_;
  transaction step(db_);
  db_.exec("SELECT pg_advisory_xact_lock($1)", params().add(ownership_lock_key));
  db_.exec(
      "INSERT INTO surge_drainer(name, subscribers, started_at, seen_at, expires_at) "
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
    db_.exec(
        "INSERT INTO surge_owner(subscriber_id, drainer, fence, taken_at) "
        "SELECT id, $2, 1, $3 FROM unnest($1::bigint[]) AS id "
        "ON CONFLICT (subscriber_id) DO UPDATE SET drainer = excluded.drainer, "
        "fence = surge_owner.fence + 1, taken_at = excluded.taken_at",
        params().add_array(plan.take).add(owner_).add(now));
  }
  if (!plan.release.empty()) {
    db_.exec(
        "UPDATE surge_owner SET drainer = '' WHERE subscriber_id = ANY($1::bigint[]) "
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

}  // namespace surge::storage::pg
