#include "storage/sqlite/token_leases.hpp"

#include <algorithm>
#include <limits>

#include <SQLiteCpp/Transaction.h>

#include "proto/persisted_bucket.hpp"
#include "storage/sqlite/sql_support.hpp"

namespace surge::storage::sqlite {

namespace {

constexpr const char* read_sql =
    "SELECT tokens, tokens_updated_at, rate_per_sec, burst FROM webhook_subscriber WHERE id = ?";
constexpr const char* write_sql =
    "UPDATE webhook_subscriber SET tokens = ?, tokens_updated_at = ? WHERE id = ?";

// Limits that are not numbers pause the subscriber elsewhere; here they read as a bucket that
// neither refills nor holds more than one token, so nothing is handed out for them.
double number_or(const SQLite::Column& column, double fallback) {
  return column.isInteger() || column.isFloat() ? column.getDouble() : fallback;
}

// A count or stamp that is not a number (text written by another program) is repaired as
// proto::repaired says; `repair` gets why, when something was.
// `stored`, when given, gets the bucket as it was before any repair.
bool read_bucket(SQLite::Statement& read, std::int64_t id, proto::persisted_bucket& bucket,
                 double now, std::string* repair = nullptr,
                 proto::persisted_bucket* stored = nullptr) {
  read.bind(1, id);
  if (!read.executeStep()) return false;
  constexpr double not_a_number = std::numeric_limits<double>::quiet_NaN();
  bucket.tokens = number_or(read.getColumn(0), not_a_number);
  bucket.updated_at = number_or(read.getColumn(1), not_a_number);
  bucket.rate = number_or(read.getColumn(2), 0);
  bucket.burst = number_or(read.getColumn(3), 1);
  if (stored) *stored = bucket;
  auto fixed = proto::repaired(bucket, now);
  bucket = fixed.bucket;
  if (repair) *repair = std::move(fixed.why);
  return true;
}

// Returns the stamp written.
double write_bucket(SQLite::Statement& write, std::int64_t id, double tokens,
                    const proto::persisted_bucket& read, double now) {
  sqlite::statement_use use(write);
  const double stamp = proto::stamp_for_write(read, now);
  write.bind(1, tokens);
  write.bind(2, stamp);
  write.bind(3, id);
  write.exec();
  return stamp;
}

}  // namespace

const bucket_statements& seed000_bucket_statements() {
  static const bucket_statements statements{.read = read_sql, .write = write_sql};
  return statements;
}

token_leaser::token_leaser(SQLite::Database& db, double reserve_seconds,
                           const bucket_statements& statements)
    : read_(db, statements.read), write_(db, statements.write), reserve_seconds_(reserve_seconds) {}

std::vector<token_grant> token_leaser::lease(std::span<const subscriber_demand> demand,
                                             double now) {
  std::vector<token_grant> grants;
  for (const auto& entry : demand) {
    if (entry.tokens == 0) continue;
    proto::persisted_bucket bucket;
    proto::persisted_bucket stored;
    std::string repaired;
    {
      sqlite::statement_use use(read_);
      if (!read_bucket(read_, entry.subscriber_id, bucket, now, &repaired, &stored)) {
        if (entry.tokens > 0) grants.push_back({.subscriber_id = entry.subscriber_id});
        continue;
      }
    }
    const bool shared = sharing_.read(entry.subscriber_id, stored.tokens, stored.updated_at, now);
    if (entry.tokens < 0) {
      const double left = proto::give_back(bucket, -entry.tokens, now);
      sharing_.wrote(entry.subscriber_id, left,
                     write_bucket(write_, entry.subscriber_id, left, bucket, now));
      continue;
    }
    const auto take =
        proto::take_tokens(bucket, entry.tokens, now,
                           shared ? 0.0 : std::max(reserve_seconds_, entry.reserve_seconds));
    grants.push_back({.subscriber_id = entry.subscriber_id,
                      .tokens = take.taken,
                      .next_token_at = take.next_token_at,
                      .repaired = std::move(repaired),
                      .shared = shared});
    // A repaired bucket is written back even when nothing was taken, so it is repaired once.
    if (take.taken > 0 || !grants.back().repaired.empty()) {
      sharing_.wrote(entry.subscriber_id, take.left,
                     write_bucket(write_, entry.subscriber_id, take.left, bucket, now));
    }
  }
  return grants;
}

void give_back_tokens(SQLite::Database& db, std::span<const unspent_tokens> tokens, double now,
                      const bucket_statements& statements) {
  bool any = false;
  for (const auto& entry : tokens) any = any || entry.tokens > 0;
  if (!any) return;
  SQLite::Transaction transaction(db, SQLite::TransactionBehavior::IMMEDIATE);
  SQLite::Statement read(db, statements.read);
  SQLite::Statement write(db, statements.write);
  for (const auto& entry : tokens) {
    if (entry.tokens <= 0) continue;
    proto::persisted_bucket bucket;
    {
      sqlite::statement_use use(read);
      if (!read_bucket(read, entry.subscriber_id, bucket, now)) continue;
    }
    write_bucket(write, entry.subscriber_id, proto::give_back(bucket, entry.tokens, now), bucket,
                 now);
  }
  transaction.commit();
}

}  // namespace surge::storage::sqlite
