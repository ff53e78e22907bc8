#include "storage/sqlite/ownership.hpp"

#include <algorithm>

#include <SQLiteCpp/Statement.h>
#include <SQLiteCpp/Transaction.h>

#include "proto/ownership.hpp"
#include "storage/ownership_support.hpp"

namespace surge::storage::sqlite {
namespace detail {

// The heartbeats that count at :now (bind :horizon to now + max_heartbeat_seconds): the
// renewal and `surge stats` must agree on which drains are live.
constexpr const char* live_heartbeat_sql =
    "typeof(expires_at) IN ('real', 'integer') AND expires_at > :now "
    "AND expires_at <= :horizon";

}  // namespace detail

using namespace surge::storage::detail;
using namespace detail;

ownership_keeper::ownership_keeper(SQLite::Database& db, std::string name, proto::id_set allowed,
                                   double heartbeat_seconds, std::string subscriber_table)
    : db_(db),
      name_(std::move(name)),
      allowed_(std::move(allowed)),
      subscriber_table_(std::move(subscriber_table)),
      heartbeat_seconds_(heartbeat_seconds) {}

ownership_change ownership_keeper::renew(double now) {
  if (started_at_ == 0) started_at_ = now;
  SQLite::Transaction transaction(db_, SQLite::TransactionBehavior::IMMEDIATE);
  const double alive_until = now + heartbeat_seconds_;
  {
    SQLite::Statement beat(db_,
                           "INSERT INTO surge_drainer(name, subscribers, started_at, seen_at, "
                           "expires_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT(name) DO UPDATE SET "
                           "subscribers = excluded.subscribers, seen_at = excluded.seen_at, "
                           "expires_at = excluded.expires_at");
    beat.bind(1, name_);
    beat.bind(2, selection_text(allowed_));
    beat.bind(3, started_at_);
    beat.bind(4, now);
    beat.bind(5, alive_until);
    beat.exec();
  }
  std::vector<proto::live_drainer> live;
  std::vector<std::string> gone;
  {
    SQLite::Statement query(db_, std::string("SELECT name, subscribers FROM surge_drainer WHERE ") +
                                     live_heartbeat_sql + " ORDER BY name");
    query.bind(":now", now);
    query.bind(":horizon", now + max_heartbeat_seconds);
    while (query.executeStep()) {
      auto name = query.getColumn(0).getString();
      if (gone_from_this_host(name_, name)) {
        gone.push_back(std::move(name));
        continue;
      }
      live.push_back({std::move(name), parse_selection(query.getColumn(1).getString())});
    }
  }
  if (!gone.empty()) {
    SQLite::Statement end(db_, "UPDATE surge_drainer SET expires_at = ? WHERE name = ?");
    for (const auto& name : gone) {
      end.bind(1, now);
      end.bind(2, name);
      end.exec();
      end.reset();
    }
  }
  proto::renewal_view view{.live = std::move(live)};
  {
    SQLite::Statement query(db_,
                            "SELECT COUNT(*), COALESCE(MAX(id), 0), (SELECT COUNT(*) FROM "
                            "surge_owner WHERE drainer = ?) FROM " +
                                subscriber_table_);
    query.bind(1, name_);
    query.executeStep();
    view.subscriber_count = query.getColumn(0).getInt64();
    view.highest_subscriber_id = query.getColumn(1).getInt64();
    view.owned_by_self = query.getColumn(2).getInt64();
  }
  if (proto::heartbeat_is_enough(last_full_, view, now, alive_until_, full_renewal_every_seconds)) {
    transaction.commit();
    alive_until_ = alive_until;
    return {};
  }
  std::vector<std::int64_t> subscribers;
  {
    SQLite::Statement query(db_, "SELECT id FROM " + subscriber_table_ + " ORDER BY id");
    while (query.executeStep()) subscribers.push_back(query.getColumn(0).getInt64());
  }
  std::vector<proto::subscriber_owner> owners;
  {
    // An ownership lives as long as its drainer's heartbeat (an implausible one reads as 0).
    SQLite::Statement query(db_,
                            "SELECT o.subscriber_id, o.drainer, CASE WHEN typeof(d.expires_at) "
                            "IN ('real', 'integer') AND d.expires_at <= ? THEN d.expires_at "
                            "ELSE 0 END FROM surge_owner o JOIN surge_drainer d "
                            "ON d.name = o.drainer");
    query.bind(1, now + max_heartbeat_seconds);
    while (query.executeStep()) {
      owners.push_back({query.getColumn(0).getInt64(), query.getColumn(1).getString(),
                        query.getColumn(2).getDouble()});
    }
  }
  const auto plan = proto::plan_ownership(name_, subscribers, view.live, owners, now);
  {
    SQLite::Statement take(db_,
                           "INSERT INTO surge_owner(subscriber_id, drainer, fence, taken_at) "
                           "VALUES (?, ?, 1, ?) ON CONFLICT(subscriber_id) DO UPDATE SET "
                           "drainer = excluded.drainer, fence = fence + 1, "
                           "taken_at = excluded.taken_at");
    for (const auto id : plan.take) {
      take.bind(1, id);
      take.bind(2, name_);
      take.bind(3, now);
      take.exec();
      take.reset();
    }
    SQLite::Statement release(db_,
                              "UPDATE surge_owner SET drainer = '' "
                              "WHERE subscriber_id = ? AND drainer = ?");
    for (const auto id : plan.release) {
      release.bind(1, id);
      release.bind(2, name_);
      release.exec();
      release.reset();
    }
    SQLite::Statement prune(db_, "DELETE FROM surge_drainer WHERE expires_at < ?");
    prune.bind(1, now - dead_drainer_keep_seconds);
    prune.exec();
  }
  transaction.commit();

  ++full_renewals_;
  auto change = apply_plan(plan, owned_, std::move(view), now, last_full_);
  alive_until_ = alive_until;
  return change;
}

void ownership_keeper::release_all() {
  SQLite::Transaction transaction(db_, SQLite::TransactionBehavior::IMMEDIATE);
  SQLite::Statement release(db_, "UPDATE surge_owner SET drainer = '' WHERE drainer = ?");
  release.bind(1, name_);
  release.exec();
  SQLite::Statement forget(db_, "DELETE FROM surge_drainer WHERE name = ?");
  forget.bind(1, name_);
  forget.exec();
  transaction.commit();
  owned_.clear();
  alive_until_ = 0;
  last_full_.reset();
}

std::vector<drainer_ownership> read_ownership(SQLite::Database& db, double now) {
  std::vector<drainer_ownership> drainers;
  if (!db.tableExists("surge_drainer")) return drainers;
  SQLite::Statement query(db,
                          std::string("SELECT d.name, d.subscribers, d.started_at, d.seen_at, "
                                      "o.subscriber_id FROM (SELECT * FROM surge_drainer WHERE ") +
                              live_heartbeat_sql +
                              ") d LEFT JOIN surge_owner o ON o.drainer = d.name "
                              "ORDER BY d.name, o.subscriber_id");
  query.bind(":now", now);
  query.bind(":horizon", now + max_heartbeat_seconds);
  while (query.executeStep()) {
    const std::string name = query.getColumn(0).getString();
    if (drainers.empty() || drainers.back().name != name) {
      drainers.push_back({name,
                          query.getColumn(1).getString(),
                          query.getColumn(2).getDouble(),
                          query.getColumn(3).getDouble(),
                          {}});
    }
    if (!query.getColumn(4).isNull())
      drainers.back().subscribers.push_back(query.getColumn(4).getInt64());
  }
  return drainers;
}

}  // namespace surge::storage::sqlite
