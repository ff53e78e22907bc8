// surge stats: what is in the queue, overall and per subscriber.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <boost/json/array.hpp>
#include <boost/json/value.hpp>

#include "proto/clock.hpp"
#include "proto/target_policy.hpp"
#include "storage/connection.hpp"
#include "storage/database.hpp"
#include "storage/ownership.hpp"
#include "storage/ordered_keys.hpp"
#include "storage/partner_quotas.hpp"
#include "storage/queue.hpp"
#include "storage/schema.hpp"
#include "storage/subscribers.hpp"
#include "tools/commands.hpp"
#include "tools/json_text.hpp"

namespace surge::tools {

namespace {

boost::json::object to_json(const storage::status_counts& counts) {
  boost::json::object leased_by;
  for (const auto& [owner, rows] : counts.leased_by) leased_by[owner] = rows;
  return {{"pending", counts.pending},
          {"retry", counts.retry},
          {"done", counts.done},
          {"coalesced", counts.coalesced},
          {"dead", counts.dead},
          {"due_now", counts.due_now},
          {"leased", counts.leased},
          {"leased_by", std::move(leased_by)},
          {"oldest_due_age_seconds", counts.oldest_due_age}};
}

// Who holds the leased rows: each Surge process by owner, "other" for the steady-state drainer.
void print_lease_holders(const storage::queue_stats& stats) {
  if (stats.total.leased_by.empty()) return;
  std::printf("\n%-32s %10s  %s\n", "leased by", "rows", "subscribers");
  for (const auto& [owner, rows] : stats.total.leased_by) {
    std::string subscribers;
    for (const auto& s : stats.per_subscriber) {
      if (!s.leased_by.contains(owner)) continue;
      if (!subscribers.empty()) subscribers += ",";
      subscribers += std::to_string(s.subscriber_id);
    }
    std::printf("%-32s %10lld  %s\n", owner.c_str(), static_cast<long long>(rows),
                subscribers.c_str());
  }
}

// Which live drain owns which subscribers (ownership leases: only the owner sends).
void print_owners(const std::vector<storage::drainer_ownership>& drainers, double now) {
  if (drainers.empty()) return;
  std::printf("\n%-32s %11s %8s %10s  %s\n", "owner", "subscribers", "seen_s", "allowed", "owned");
  for (const auto& d : drainers) {
    std::string owned;
    for (const auto id : d.subscribers) owned += (owned.empty() ? "" : ",") + std::to_string(id);
    std::printf("%-32s %11zu %8.1f %10s  %s\n", d.name.c_str(), d.subscribers.size(),
                now - d.seen_at, d.allowed.c_str(), owned.empty() ? "-" : owned.c_str());
  }
}

boost::json::array owners_json(const std::vector<storage::drainer_ownership>& drainers) {
  boost::json::array out;
  for (const auto& d : drainers) {
    boost::json::array owned;
    for (const auto id : d.subscribers) owned.push_back(id);
    out.push_back({{"name", d.name},
                   {"allowed", d.allowed},
                   {"started_at", d.started_at},
                   {"seen_at", d.seen_at},
                   {"subscribers", std::move(owned)}});
  }
  return out;
}

void print_row(const std::string& label, const storage::status_counts& c,
               const std::string& state = "") {
  std::printf("%-12s %10lld %8lld %10lld %9lld %8lld %9lld %8lld %12.1f  %s\n", label.c_str(),
              static_cast<long long>(c.pending), static_cast<long long>(c.retry),
              static_cast<long long>(c.done), static_cast<long long>(c.coalesced),
              static_cast<long long>(c.dead), static_cast<long long>(c.due_now),
              static_cast<long long>(c.leased), c.oldest_due_age, state.c_str());
}

// What the queue itself says about a subscriber's rows: whether they can be sent at all, and
// what holds them. What only a running drain knows (an open circuit, 503s, its ETA) is on that
// drain's live page and status line.
class stored_states {
 public:
  stored_states(storage::connection& db, double now) : now_(now) {
    for (auto& row : storage::load_subscribers(db)) subscribers_.emplace(row.id, std::move(row));
    for (const auto& key : storage::list_stopped_keys(db)) ++stopped_[key.subscriber_id];
    for (const auto& quota : storage::load_partner_quotas(db)) {
      if (quota.paced_until > now) quotas_.emplace(quota.subscriber_id, quota);
    }
  }

  std::string of(std::int64_t id) const {
    const auto row = subscribers_.find(id);
    if (row == subscribers_.end()) return "deleted";
    if (!row->second.active) return "inactive";
    if (!(row->second.rate_per_sec > 0)) return "rate 0";
    std::string state = "sendable";
    if (const auto quota = quotas_.find(id); quota != quotas_.end()) {
      char text[64];
      if (quota->second.paced_rate <= 0) {
        std::snprintf(text, sizeof text, "paused %.0f s more", quota->second.paced_until - now_);
      } else {
        std::snprintf(text, sizeof text, "quota_paced %.3g/s", quota->second.paced_rate);
      }
      state = text;
    }
    if (const auto keys = stopped_.find(id); keys != stopped_.end()) {
      state += ", " + std::to_string(keys->second) + " keys stopped";
    }
    return state;
  }

 private:
  double now_;
  std::map<std::int64_t, storage::subscriber_row> subscribers_;
  std::map<std::int64_t, std::int64_t> stopped_;
  std::map<std::int64_t, storage::partner_quota_row> quotas_;
};

// Subscribers with batches or coalescing on: what shapes their traffic besides the rate.
std::vector<storage::subscriber_row> relief_subscribers(storage::connection& db) {
  std::vector<storage::subscriber_row> out;
  for (auto& row : storage::load_subscribers(db)) {
    if (row.batch_max > 1 || !row.coalesce_key.empty()) out.push_back(std::move(row));
  }
  return out;
}

void print_relief(const std::vector<storage::subscriber_row>& rows) {
  if (rows.empty()) return;
  std::printf("\n%-12s %6s %10s %8s  %s\n", "subscriber", "batch", "bytes", "linger",
              "coalesce (window, events)");
  for (const auto& r : rows) {
    char window[32];
    std::snprintf(window, sizeof window, "%g", r.coalesce_window);
    const std::string coalesce =
        r.coalesce_key.empty() ? "-"
                               : r.coalesce_key + " (" + window + " s, " + r.coalesce_events + ")";
    std::printf("%-12lld %6lld %10lld %7.2fs  %s\n", static_cast<long long>(r.id),
                static_cast<long long>(r.batch_max), static_cast<long long>(r.batch_bytes),
                r.batch_linger, coalesce.c_str());
  }
}

// Subscribers that send extra headers, present a client certificate or leave through a proxy of
// their own. Header names only: the values are credentials, and stats output ends up in tickets
// and terminals.
std::vector<storage::subscriber_row> credential_subscribers(storage::connection& db) {
  std::vector<storage::subscriber_row> out;
  for (auto& row : storage::load_subscribers(db)) {
    if (!row.extra_headers.empty() || !row.client_cert_file.empty() ||
        !row.client_key_file.empty() || !row.proxy.empty()) {
      out.push_back(std::move(row));
    }
  }
  return out;
}

std::string header_names(const storage::subscriber_row& row) {
  std::string names;
  for (const auto& field : row.extra_headers) names += (names.empty() ? "" : ", ") + field.name;
  return names.empty() ? "-" : names;
}

void print_credentials(const std::vector<storage::subscriber_row>& rows) {
  if (rows.empty()) return;
  std::printf("\n%-12s %-32s  %-28s  %s\n", "subscriber", "extra headers (values hidden)", "proxy",
              "client certificate (key)");
  for (const auto& r : rows) {
    const std::string cert =
        r.client_cert_file.empty() ? "-" : r.client_cert_file + " (" + r.client_key_file + ")";
    const std::string proxy = r.proxy.empty() ? "-" : proto::redact_url(r.proxy);
    std::printf("%-12lld %-32s  %-28s  %s\n", static_cast<long long>(r.id), header_names(r).c_str(),
                proxy.c_str(), cert.c_str());
  }
}

boost::json::array credentials_json(const std::vector<storage::subscriber_row>& rows) {
  boost::json::array out;
  for (const auto& r : rows) {
    boost::json::array names;
    for (const auto& field : r.extra_headers) names.push_back(boost::json::string(field.name));
    out.push_back({{"subscriber_id", r.id},
                   {"headers", std::move(names)},
                   {"client_cert", r.client_cert_file},
                   {"client_key", r.client_key_file},
                   {"proxy", r.proxy}});
  }
  return out;
}

// The quota each partner last announced beside the limit configured for it: where they disagree,
// the drain paced to the partner's (downwards only).
struct announced_view {
  storage::partner_quota_row quota;
  std::optional<storage::subscriber_row> subscriber;
};

std::vector<announced_view> announced_quotas(storage::connection& db) {
  std::vector<announced_view> out;
  const auto quotas = storage::load_partner_quotas(db);
  if (quotas.empty()) return out;
  const auto subscribers = storage::load_subscribers(db);
  for (const auto& quota : quotas) {
    announced_view view{quota, std::nullopt};
    for (const auto& row : subscribers) {
      if (row.id == quota.subscriber_id) view.subscriber = row;
    }
    out.push_back(std::move(view));
  }
  return out;
}

std::string announced_text(const storage::partner_quota_row& q) {
  char text[96];
  if (q.quota && q.window_seconds) {
    std::snprintf(text, sizeof text, "%lld per %g s (%.3g/s)", static_cast<long long>(*q.quota),
                  *q.window_seconds, static_cast<double>(*q.quota) / *q.window_seconds);
  } else if (q.quota) {
    std::snprintf(text, sizeof text, "%lld", static_cast<long long>(*q.quota));
  } else {
    std::snprintf(text, sizeof text, "-");
  }
  return text;
}

void print_announced(const std::vector<announced_view>& views, double now) {
  if (views.empty()) return;
  std::printf("\n%-12s %-14s %-24s %8s %10s %-16s %8s\n", "subscriber", "configured",
              "announced quota", "left", "resets_s", "paced", "seen_s");
  for (const auto& [q, sub] : views) {
    char configured[32] = "-";
    if (sub) {
      std::snprintf(configured, sizeof configured, "%g/s b%lld", sub->rate_per_sec,
                    static_cast<long long>(sub->burst));
    }
    char paced[40] = "configured";
    if (q.paced_until > now) {
      if (q.paced_rate <= 0) {
        std::snprintf(paced, sizeof paced, "paused");
      } else {
        std::snprintf(paced, sizeof paced, "%.3g/s b%g", q.paced_rate, q.paced_burst);
      }
    }
    std::printf("%-12lld %-14s %-24s %8lld %10.1f %-16s %8.1f\n",
                static_cast<long long>(q.subscriber_id), configured, announced_text(q).c_str(),
                static_cast<long long>(q.remaining), std::max(0.0, q.reset_at - now), paced,
                std::max(0.0, now - q.seen_at));
  }
}

boost::json::array announced_json(const std::vector<announced_view>& views, double now) {
  boost::json::array out;
  for (const auto& [q, sub] : views) {
    boost::json::object entry{{"subscriber_id", q.subscriber_id},
                              {"form", q.form},
                              {"remaining", q.remaining},
                              {"reset_at", q.reset_at},
                              {"reset_in_seconds", std::max(0.0, q.reset_at - now)},
                              {"seen_at", q.seen_at},
                              {"paced", q.paced_until > now},
                              {"paced_rate", q.paced_rate},
                              {"paced_burst", q.paced_burst},
                              {"paced_until", q.paced_until}};
    entry["quota"] = q.quota ? boost::json::value(*q.quota) : boost::json::value(nullptr);
    entry["window_seconds"] =
        q.window_seconds ? boost::json::value(*q.window_seconds) : boost::json::value(nullptr);
    if (sub) {
      entry["configured_rate"] = sub->rate_per_sec;
      entry["configured_burst"] = sub->burst;
    }
    out.push_back(std::move(entry));
  }
  return out;
}

// Ordered subscribers' keys a dead row stopped: their later rows wait for the operator.
void print_stopped_keys(const std::vector<storage::stopped_key>& keys, double now) {
  if (keys.empty()) return;
  std::printf("\n%-12s %-32s %12s %10s  %s\n", "subscriber", "stopped key", "dead row", "stopped_s",
              "resume with");
  for (const auto& k : keys) {
    std::printf("%-12lld %-32s %12lld %10.1f  surge dead replay, or surge subscriber resume-key\n",
                static_cast<long long>(k.subscriber_id), k.key.c_str(),
                static_cast<long long>(k.delivery_id), now - k.stopped_at);
  }
}

boost::json::array stopped_keys_json(const std::vector<storage::stopped_key>& keys) {
  boost::json::array out;
  for (const auto& k : keys) {
    out.push_back({{"subscriber_id", k.subscriber_id},
                   {"key", k.key},
                   {"delivery_id", k.delivery_id},
                   {"stopped_at", k.stopped_at}});
  }
  return out;
}

}  // namespace

void add_stats_command(CLI::App& app, command_action& action) {
  auto* cmd = app.add_subcommand("stats", "Show the queue by status and subscriber.");
  auto db_path = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  auto shape = std::make_shared<std::string>();
  cmd->add_option("--db", *db_path, "Queue: a SQLite file or a postgresql:// URI")
      ->required()
      ->check(existing_queue());
  add_queue_shape_option(cmd, *shape);
  cmd->add_flag("--json", *json, "Print JSON instead of a table");
  cmd->callback([&action, db_path, json, shape] {
    action = [db_path, json, shape] {
      storage::connection db(
          {.location = *db_path, .create_if_missing = false, .shape = named_shape(*shape)});
      // A seed000 queue only the steady-state drainer has used lacks the columns Surge reads
      // (seed001's stats read its own tables only): say how to add them, before printing
      // anything, rather than quote the database's error halfway. A queue of no shape Surge can
      // use is told apart first (exit 2, naming what is missing).
      if (db.shape() == storage::queue_shape::seed000 && storage::schema_version(db) == 0) {
        const storage::error unmigrated("Surge has not migrated this queue yet",
                                        storage::error::kind::schema_missing);
        throw storage::error(storage::with_remedy(unmigrated, *db_path), unmigrated.what_kind());
      }
      const double now = proto::unix_now();
      const auto stats = storage::read_stats(db, now);
      const auto owners = storage::read_ownership(db, now);
      if (*json) {
        boost::json::object out = to_json(stats.total);
        boost::json::array subscribers;
        const stored_states states(db, now);
        for (const auto& s : stats.per_subscriber) {
          auto entry = to_json(s);
          entry["subscriber_id"] = s.subscriber_id;
          entry["state"] = states.of(s.subscriber_id);
          subscribers.push_back(std::move(entry));
        }
        out["subscribers"] = std::move(subscribers);
        boost::json::array relief;
        for (const auto& r : relief_subscribers(db)) {
          relief.push_back({{"subscriber_id", r.id},
                            {"batch_max", r.batch_max},
                            {"batch_bytes", r.batch_bytes},
                            {"batch_linger", r.batch_linger},
                            {"coalesce_key", r.coalesce_key},
                            {"coalesce_window", r.coalesce_window},
                            {"coalesce_events", r.coalesce_events}});
        }
        out["batching_and_coalescing"] = std::move(relief);
        out["owners"] = owners_json(owners);
        out["credentials"] = credentials_json(credential_subscribers(db));
        out["announced_quotas"] = announced_json(announced_quotas(db), now);
        out["stopped_keys"] = stopped_keys_json(storage::list_stopped_keys(db));
        std::cout << json_text(out) << "\n";
        return exit_ok;
      }
      std::printf("%-12s %10s %8s %10s %9s %8s %9s %8s %12s  %s\n", "subscriber", "pending",
                  "retry", "done", "coalesced", "dead", "due_now", "leased", "oldest_due_s",
                  "state");
      const stored_states states(db, now);
      for (const auto& s : stats.per_subscriber) {
        print_row(std::to_string(s.subscriber_id), s, states.of(s.subscriber_id));
      }
      print_row("total", stats.total);
      print_lease_holders(stats);
      print_owners(owners, now);
      print_relief(relief_subscribers(db));
      print_credentials(credential_subscribers(db));
      print_announced(announced_quotas(db), now);
      print_stopped_keys(storage::list_stopped_keys(db), now);
      return exit_ok;
    };
  });
}

}  // namespace surge::tools
