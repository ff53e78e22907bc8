#include "storage/sqlite/outcomes.hpp"

#include <SQLiteCpp/Transaction.h>

#include "proto/clock.hpp"
#include "storage/sqlite/ordered_keys.hpp"
#include "storage/sqlite/sql_support.hpp"

namespace surge::storage::sqlite {
namespace {

// Every update is fenced on our lease (the last two parameters): a row re-claimed by anyone after
// our lease expired has a different locked_until and is left alone.
constexpr const char* done_sql =
    "UPDATE webhook_delivery SET status = 'done', attempts = ?, last_status = ?, "
    "last_error = NULL, delivered_at = ?, locked_until = 0 WHERE id = ? AND locked_until = ?";
constexpr const char* retry_sql =
    "UPDATE webhook_delivery SET status = 'retry', attempts = ?, next_attempt_at = ?, "
    "last_status = ?, last_error = ?, locked_until = 0 WHERE id = ? AND locked_until = ?";
constexpr const char* dead_sql =
    "UPDATE webhook_delivery SET status = 'dead', attempts = ?, last_status = ?, "
    "last_error = ?, locked_until = 0 WHERE id = ? AND locked_until = ?";
constexpr const char* release_sql =
    "UPDATE webhook_delivery SET locked_until = 0 WHERE id = ? AND locked_until = ?";
// delivered_at stays NULL: the row was never sent; last_error names the row that was.
constexpr const char* coalesced_sql =
    "UPDATE webhook_delivery SET status = 'done', last_error = ?, coalesced_into = ?, "
    "locked_until = 0 WHERE id = ? AND locked_until = ?";
// The row sent in its place stands for its history from now on.
constexpr const char* stands_for_sql =
    "UPDATE webhook_delivery SET coalesced_since = MIN(COALESCE(coalesced_since, created_at), ?) "
    "WHERE id = ?";
// Attempt records go in several rows to a statement: each execution of a statement costs about
// as much again as the row it inserts (BM_storage_outcomes).
constexpr int attempts_per_insert = 16;
constexpr int attempt_columns = 9;

std::string insert_attempts_sql(int rows) {
  std::string sql =
      "INSERT INTO surge_attempt(delivery_id, subscriber_id, attempt, started_at, finished_at, "
      "status_code, error_class, batch_lead, batch_size) VALUES ";
  for (int i = 0; i < rows; ++i) sql += i == 0 ? "(?,?,?,?,?,?,?,?,?)" : ",(?,?,?,?,?,?,?,?,?)";
  return sql;
}

// 0 and "" mean "none" in the structs; the columns say it with NULL.
void bind_status(SQLite::Statement& statement, int index, int status) {
  if (status == 0) {
    statement.bind(index);
  } else {
    statement.bind(index, status);
  }
}

void bind_text(SQLite::Statement& statement, int index, const std::string& text) {
  if (text.empty()) {
    statement.bind(index);
  } else {
    statement.bind(index, text);
  }
}

void bind_attempt(SQLite::Statement& statement, int first, const attempt_record& attempt) {
  statement.bind(first, attempt.delivery_id);
  statement.bind(first + 1, attempt.subscriber_id);
  statement.bind(first + 2, attempt.attempt);
  statement.bind(first + 3, attempt.started_at);
  statement.bind(first + 4, attempt.finished_at);
  bind_status(statement, first + 5, attempt.status_code);
  bind_text(statement, first + 6, attempt.error_class);
  if (attempt.batch_lead == 0) {
    statement.bind(first + 7);
  } else {
    statement.bind(first + 7, attempt.batch_lead);
  }
  statement.bind(first + 8, attempt.batch_size);
}

}  // namespace

outcome_applier::outcome_applier(SQLite::Database& db, const delivery_table& table)
    : db_(db),
      attempts_(db),
      deactivate_(db,
                  std::string("UPDATE ") + table.subscriber_table + " SET active = 0 WHERE id = ?"),
      exists_(db, std::string("SELECT 1 FROM ") + table.name + " WHERE id = ?") {}

outcome_applier::~outcome_applier() = default;

void outcome_applier::stop_key_if_asked(const outcome& item, write_report& report) {
  if (item.kind != outcome_kind::dead || !item.stops_key) return;
  if (!stop_key_) stop_key_ = std::make_unique<SQLite::Statement>(db_, stop_key_sql);
  sqlite::statement_use use(*stop_key_);
  stop_key_->bind(1, item.stops_key->subscriber_id);
  stop_key_->bind(2, item.stops_key->key);
  stop_key_->bind(3, item.delivery_id);
  const double now = proto::unix_now();
  stop_key_->bind(4, now);
  if (stop_key_->exec() == 0) return;  // stopped already
  auto stopped = *item.stops_key;
  stopped.delivery_id = item.delivery_id;
  stopped.stopped_at = now;
  report.keys_stopped.push_back(std::move(stopped));
}

write_report outcome_applier::write(std::span<const outcome> batch,
                                    std::span<const std::int64_t> deactivate) {
  if (batch.empty() && deactivate.empty()) return {};
  SQLite::Transaction transaction(db_, SQLite::TransactionBehavior::IMMEDIATE);
  auto report = apply(batch, deactivate);
  transaction.commit();
  return report;
}

attempt_recorder::attempt_recorder(SQLite::Database& db)
    : one_(std::make_unique<SQLite::Statement>(db, insert_attempts_sql(1))),
      many_(std::make_unique<SQLite::Statement>(db, insert_attempts_sql(attempts_per_insert))) {}

attempt_recorder::~attempt_recorder() = default;

write_report outcome_applier::apply(std::span<const outcome> batch,
                                    std::span<const std::int64_t> deactivate) {
  write_report report;
  std::vector<const attempt_record*> attempts;
  attempts.reserve(batch.size());
  for (const auto& item : batch) {
    if (write_fenced(item) > 0) {
      ++report.applied;
      stop_key_if_asked(item, report);
      landed(item);
    } else {
      report.lost_leases.push_back(item.delivery_id);
      if (!row_exists(item.delivery_id)) report.deleted.push_back(item.delivery_id);
    }
    // Recorded even when the fence failed: the request was still sent and the partner saw it.
    if (item.has_attempt) attempts.push_back(&item.attempt);
  }
  attempts_.insert(attempts);
  for (const std::int64_t id : deactivate) {
    sqlite::statement_use use(deactivate_);
    deactivate_.bind(1, id);
    deactivate_.exec();
  }
  return report;
}

bool outcome_applier::row_exists(std::int64_t delivery_id) {
  sqlite::statement_use use(exists_);
  exists_.bind(1, delivery_id);
  return exists_.executeStep();
}

outcome_writer::outcome_writer(SQLite::Database& db)
    : outcome_applier(db, seed000_deliveries()),
      done_(db, done_sql),
      retry_(db, retry_sql),
      dead_(db, dead_sql),
      release_(db, release_sql),
      coalesced_(db, coalesced_sql),
      stands_for_(db, stands_for_sql) {}

outcome_writer::~outcome_writer() = default;

int outcome_writer::write_fenced(const outcome& item) {
  SQLite::Statement& statement = [&]() -> SQLite::Statement& {
    switch (item.kind) {
      case outcome_kind::retry: return retry_;
      case outcome_kind::dead: return dead_;
      case outcome_kind::release: return release_;
      case outcome_kind::coalesced: return coalesced_;
      case outcome_kind::done: break;
    }
    return done_;
  }();
  sqlite::statement_use use(statement);
  int next = 1;
  switch (item.kind) {
    case outcome_kind::done:
      statement.bind(next++, item.attempts);
      bind_status(statement, next++, item.last_status);
      statement.bind(next++, item.finished_at);
      break;
    case outcome_kind::retry:
      statement.bind(next++, item.attempts);
      statement.bind(next++, item.next_attempt_at);
      bind_status(statement, next++, item.last_status);
      bind_text(statement, next++, item.last_error);
      break;
    case outcome_kind::dead:
      statement.bind(next++, item.attempts);
      bind_status(statement, next++, item.last_status);
      bind_text(statement, next++, item.last_error);
      break;
    case outcome_kind::release: break;
    case outcome_kind::coalesced:
      bind_text(statement, next++, item.last_error);
      statement.bind(next++, item.coalesced_into);
      break;
  }
  statement.bind(next++, item.delivery_id);
  statement.bind(next, item.lease);
  return statement.exec();
}

void outcome_writer::landed(const outcome& item) {
  if (item.kind != outcome_kind::coalesced) return;
  sqlite::statement_use chain(stands_for_);
  stands_for_.bind(1, item.coalesced_since);
  stands_for_.bind(2, item.coalesced_into);
  stands_for_.exec();
}

void attempt_recorder::insert(std::span<const attempt_record* const> attempts) {
  std::size_t at = 0;
  for (; attempts.size() - at >= attempts_per_insert; at += attempts_per_insert) {
    sqlite::statement_use use(*many_);
    for (int i = 0; i < attempts_per_insert; ++i) {
      const auto& attempt = *attempts[at + static_cast<std::size_t>(i)];
      bind_attempt(*many_, 1 + i * attempt_columns, attempt);
    }
    many_->exec();
  }
  for (; at < attempts.size(); ++at) {
    sqlite::statement_use use(*one_);
    bind_attempt(*one_, 1, *attempts[at]);
    one_->exec();
  }
}

}  // namespace surge::storage::sqlite
