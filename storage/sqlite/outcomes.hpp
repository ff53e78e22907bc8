#pragma once
// The single writer of delivery outcomes on a SQLite queue: batched, fenced on our lease.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>

#include "storage/outcomes.hpp"

namespace surge::storage::sqlite {

// Writes a batch of outcomes inside a write transaction its caller holds
// (storage/sqlite/cycle.hpp): one implementation per queue shape (seed001's:
// storage/seed001/outcomes.cpp). Each row update is fenced on `lease` and frees the row; attempt
// records are inserted whether or not the fence held; subscribers in `deactivate` are made
// inactive.
class outcome_applier {
 public:
  explicit outcome_applier(SQLite::Database& db);
  virtual ~outcome_applier();
  outcome_applier(const outcome_applier&) = delete;
  outcome_applier& operator=(const outcome_applier&) = delete;

  virtual write_report apply(std::span<const outcome> batch,
                             std::span<const std::int64_t> deactivate) = 0;
  // apply() in one BEGIN IMMEDIATE transaction of its own.
  write_report write(std::span<const outcome> batch, std::span<const std::int64_t> deactivate = {});

 protected:
  // After `item`'s fenced write landed: a dead row that stops its key records it
  // (surge_stopped_key, the same table on either shape), and the report says so.
  void stop_key_if_asked(const outcome& item, write_report& report);

  SQLite::Database& db_;

 private:
  std::unique_ptr<SQLite::Statement> stop_key_;  // prepared on first use
};

// Inserts surge_attempt records, several rows to a statement; shared by the shapes' writers.
class attempt_recorder {
 public:
  explicit attempt_recorder(SQLite::Database& db);
  ~attempt_recorder();
  void insert(std::span<const attempt_record* const> attempts);

 private:
  std::unique_ptr<SQLite::Statement> one_;
  std::unique_ptr<SQLite::Statement> many_;
};

// seed000: status and the diagnostic columns Surge adds to webhook_delivery.
class outcome_writer final : public outcome_applier {
 public:
  explicit outcome_writer(SQLite::Database& db);
  ~outcome_writer() override;

  // Each row update is fenced on `id = ? AND locked_until = lease` and sets locked_until = 0.
  write_report apply(std::span<const outcome> batch,
                     std::span<const std::int64_t> deactivate) override;

 private:
  // For a fence that matched nothing: whether the row is still in the queue at all.
  bool row_exists(std::int64_t delivery_id);

  std::unique_ptr<SQLite::Statement> done_;
  std::unique_ptr<SQLite::Statement> retry_;
  std::unique_ptr<SQLite::Statement> dead_;
  std::unique_ptr<SQLite::Statement> release_;
  std::unique_ptr<SQLite::Statement> coalesced_;
  attempt_recorder attempts_;
  std::unique_ptr<SQLite::Statement> deactivate_;
  std::unique_ptr<SQLite::Statement> exists_;
  std::unique_ptr<SQLite::Statement> stands_for_;
};

}  // namespace surge::storage::sqlite
