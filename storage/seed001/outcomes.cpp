// The outcome writer of a seed001 queue: states as its write-up defines them (pending until
// delivered or dead, a retry keeping pending with the next attempt's whole second), each write
// fenced on Surge's own lease value, the reasons in Surge's own surge_delivery_note.
#include <cmath>

#include <SQLiteCpp/Statement.h>

#include "storage/seed001/outcomes.hpp"
#include "storage/seed001/sql.hpp"
#include "storage/sqlite/sql_support.hpp"

namespace surge::storage::sqlite::seed001 {
namespace {

// Fenced on our lease (the last two parameters): a row another drainer took once our lease ran
// out holds a different leased_until and is left alone. The worker's own leases are whole
// seconds; ours carry a fraction (storage/lease_values.hpp), so the two never match.
constexpr const char* delivered_sql =
    "UPDATE webhook_deliveries SET state = 'delivered', attempt = ?, leased_until = 0 "
    "WHERE id = ? AND leased_until = ?";
constexpr const char* retry_sql =
    "UPDATE webhook_deliveries SET attempt = ?, next_attempt = ?, leased_until = 0 "
    "WHERE id = ? AND leased_until = ?";
constexpr const char* dead_sql =
    "UPDATE webhook_deliveries SET state = 'dead', attempt = ?, leased_until = 0 "
    "WHERE id = ? AND leased_until = ?";
constexpr const char* release_sql =
    "UPDATE webhook_deliveries SET leased_until = 0 WHERE id = ? AND leased_until = ?";

// The shape's next_attempt is whole seconds: rounded up, so no retry goes before its delay (a
// Retry-After included) has passed.
std::int64_t whole_second_at_or_after(double unix_seconds) {
  return static_cast<std::int64_t>(std::ceil(unix_seconds));
}

}  // namespace

outcome_writer::outcome_writer(SQLite::Database& db)
    : outcome_applier(db, seed001_deliveries()),
      delivered_(db, delivered_sql),
      retry_(db, retry_sql),
      dead_(db, dead_sql),
      release_(db, release_sql),
      note_(db, note_sql) {}

outcome_writer::~outcome_writer() = default;

int outcome_writer::write_fenced(const outcome& item) {
  switch (item.kind) {
    case outcome_kind::done:
      return fenced(delivered_, item,
                    [&](SQLite::Statement& s, int& next) { s.bind(next++, item.attempts); });
    case outcome_kind::retry:
      return fenced(retry_, item, [&](SQLite::Statement& s, int& next) {
        s.bind(next++, item.attempts);
        s.bind(next++, whole_second_at_or_after(item.next_attempt_at));
      });
    case outcome_kind::dead:
      return fenced(dead_, item,
                    [&](SQLite::Statement& s, int& next) { s.bind(next++, item.attempts); });
    // A coalesced row would end done without being sent, which this shape cannot say; its
    // subscribers never coalesce (storage/seed001/queue.hpp), so none comes, and were one to,
    // the row is only given back.
    case outcome_kind::coalesced:
    case outcome_kind::release: break;
  }
  return fenced(release_, item, [](SQLite::Statement&, int&) {});
}

void outcome_writer::landed(const outcome& item) {
  if (item.kind == outcome_kind::retry || item.kind == outcome_kind::dead) write_note(item);
}

template <class BindFields>
int outcome_writer::fenced(SQLite::Statement& statement, const outcome& item,
                           BindFields&& bind_fields) {
  sqlite::statement_use use(statement);
  int next = 1;
  bind_fields(statement, next);
  statement.bind(next++, item.delivery_id);
  statement.bind(next, item.lease);
  return statement.exec();
}

void outcome_writer::write_note(const outcome& item) {
  sqlite::statement_use use(note_);
  note_.bind(1, item.delivery_id);
  if (item.last_status == 0) {
    note_.bind(2);
  } else {
    note_.bind(2, item.last_status);
  }
  if (item.last_error.empty()) {
    note_.bind(3);
  } else {
    note_.bind(3, item.last_error);
  }
  note_.bind(4, item.has_attempt ? item.attempt.finished_at : item.finished_at);
  note_.exec();
}

}  // namespace surge::storage::sqlite::seed001
