#include "storage/queue_shape.hpp"

#include <algorithm>

namespace surge::storage {
namespace {

using namespace std::chrono_literals;

constexpr queue_shape all_shapes[] = {queue_shape::seed000, queue_shape::seed001};

const found_table* find_table(std::span<const found_table> tables, std::string_view name) {
  const auto found = std::find_if(tables.begin(), tables.end(),
                                  [&](const found_table& t) { return t.name == name; });
  return found == tables.end() ? nullptr : &*found;
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& name : names) out += (out.empty() ? "" : ", ") + name;
  return out;
}

// The tables of `shape` present in `tables`, and those missing.
struct presence {
  std::vector<std::string> present;
  std::vector<std::string> missing;
};

presence presence_of(queue_shape shape, std::span<const found_table> tables) {
  presence out;
  for (const auto& table : tables_of(shape)) {
    (find_table(tables, table.name) ? out.present : out.missing).emplace_back(table.name);
  }
  return out;
}

// Columns the shape's programs use that its tables lack ("webhook_deliveries.signature").
std::vector<std::string> missing_columns(queue_shape shape, std::span<const found_table> tables) {
  std::vector<std::string> missing;
  for (const auto& table : tables_of(shape)) {
    const auto* found = find_table(tables, table.name);
    if (found == nullptr) continue;
    for (const auto column : table.columns) {
      if (std::find(found->columns.begin(), found->columns.end(), column) == found->columns.end()) {
        missing.push_back(std::string(table.name) + "." + std::string(column));
      }
    }
  }
  return missing;
}

// Why `shape`, some of whose tables are present, cannot be used; empty when it is complete.
std::string incomplete(queue_shape shape, std::span<const found_table> tables,
                       std::string_view location) {
  const auto have = presence_of(shape, tables);
  const std::string head = "the queue " + std::string(location) + " is a half-migrated " +
                           std::string(to_string(shape)) + " queue: ";
  if (!have.missing.empty()) {
    return head + "found " + joined(have.present) + ", missing " + joined(have.missing) +
           ". Finish that shape's own migration first: Surge never creates another program's "
           "tables";
  }
  const auto columns = missing_columns(shape, tables);
  if (!columns.empty()) {
    return head + "its tables lack the column" + (columns.size() == 1 ? " " : "s ") +
           joined(columns) + " that its programs use";
  }
  return {};
}

}  // namespace

std::optional<queue_shape> parse_queue_shape(std::string_view text) {
  if (text == "seed000") return queue_shape::seed000;
  if (text == "seed001") return queue_shape::seed001;
  return std::nullopt;
}

std::string_view to_string(queue_shape shape) {
  return shape == queue_shape::seed001 ? "seed001" : "seed000";
}

std::string describe(queue_shape shape) {
  std::vector<std::string> names;
  for (const auto& table : tables_of(shape)) names.emplace_back(table.name);
  return std::string(to_string(shape)) + " (" + joined(names) + ")";
}

const std::vector<shape_table>& tables_of(queue_shape shape) {
  static const std::vector<shape_table> seed000 = {
      {"webhook_subscriber",
       {"id", "url", "secret", "event_types", "rate_per_sec", "burst", "tokens",
        "tokens_updated_at", "active"}},
      {"webhook_delivery",
       {"id", "subscriber_id", "event_type", "payload", "status", "attempts", "next_attempt_at",
        "locked_until", "created_at"}},
  };
  static const std::vector<shape_table> seed001 = {
      {"webhook_subscribers",
       {"id", "endpoint", "secret", "events", "rate_per_min", "burst", "region", "active"}},
      {"webhook_deliveries",
       {"id", "subscriber_id", "event_type", "payload", "signature", "enqueued_at", "attempt",
        "next_attempt", "leased_until", "state"}},
      {"webhook_buckets", {"subscriber_id", "tokens", "updated_at"}},
  };
  return shape == queue_shape::seed001 ? seed001 : seed000;
}

shape_finding classify_queue(std::span<const found_table> tables, std::optional<queue_shape> named,
                             std::string_view location) {
  shape_finding out;
  const std::string where(location);
  if (named) {
    out.problem = incomplete(*named, tables, location);
    if (presence_of(*named, tables).present.empty()) {
      out.empty = tables.empty();
      out.problem = "the queue " + where + " holds no " + describe(*named) +
                    " table, but --queue-shape names " + std::string(to_string(*named)) +
                    (tables.empty() ? " (it holds no tables at all)" : "");
    }
    if (out.problem.empty()) out.shape = named;
    return out;
  }
  std::vector<queue_shape> seen;
  for (const auto shape : all_shapes) {
    if (!presence_of(shape, tables).present.empty()) seen.push_back(shape);
  }
  if (seen.size() > 1) {
    out.problem = "the queue " + where + " holds tables of both published shapes: seed000's " +
                  joined(presence_of(queue_shape::seed000, tables).present) + " and seed001's " +
                  joined(presence_of(queue_shape::seed001, tables).present) +
                  ". Name the one to use with --queue-shape seed000 or --queue-shape seed001 "
                  "(queue-shape in a --config file)";
    return out;
  }
  if (seen.size() == 1) {
    out.problem = incomplete(seen.front(), tables, location);
    if (out.problem.empty()) out.shape = seen.front();
    return out;
  }
  if (tables.empty()) {
    out.empty = true;
    out.problem = "the queue " + where +
                  " is empty: it holds no tables. Point --db at the queue your producers write, "
                  "or create a seed000 queue with `surge migrate --db " +
                  where + "`";
    return out;
  }
  std::vector<std::string> names;
  for (const auto& table : tables) names.push_back(table.name);
  out.problem = "the queue " + where + " is of no shape Surge knows: found the tables " +
                joined(names) + ", but neither " + describe(queue_shape::seed000) + " nor " +
                describe(queue_shape::seed001);
  return out;
}

std::string seed001_not_on_postgres(std::string_view location) {
  return "the queue " + std::string(location) +
         " is a PostgreSQL database: Surge drains the seed001 shape (webhook_subscribers, "
         "webhook_deliveries, webhook_buckets) from SQLite files only, as its write-up runs it; "
         "on PostgreSQL it drains seed000's webhook_subscriber and webhook_delivery";
}

bool holds_table_of(std::span<const found_table> tables, queue_shape shape) {
  return !presence_of(shape, tables).present.empty();
}

queue_shape usable_shape(const shape_finding& finding) {
  if (!finding.shape) throw error(finding.problem, error::kind::bad_shape);
  return *finding.shape;
}

proto::retry_config retry_defaults(queue_shape shape) {
  if (shape == queue_shape::seed000) return {};
  return {.rule = proto::backoff_rule::added_jitter,
          .added_jitter = 30s,
          .base_delay = 1s,
          .max_delay = 1h,
          .max_attempts = 12,
          .max_age = 24h};
}

}  // namespace surge::storage
