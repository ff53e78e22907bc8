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
#include "storage/sqlite/delivery_table.hpp"

namespace surge::storage::sqlite {

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

// Writes a batch of outcomes inside a write transaction its caller holds
// (storage/sqlite/cycle.hpp), the same way on every queue shape: each row update is fenced on
// `lease` and frees the row, a fence that matched nothing is reported (and whether the row is
// still there), attempt records are inserted whether or not the fence held, and subscribers in
// `deactivate` are made inactive. What each outcome writes is the shape's (seed000's below,
// seed001's in storage/seed001/outcomes.cpp).
class outcome_applier {
 public:
  outcome_applier(SQLite::Database& db, const delivery_table& table);
  virtual ~outcome_applier();
  outcome_applier(const outcome_applier&) = delete;
  outcome_applier& operator=(const outcome_applier&) = delete;

  write_report apply(std::span<const outcome> batch, std::span<const std::int64_t> deactivate);
  // apply() in one BEGIN IMMEDIATE transaction of its own.
  write_report write(std::span<const outcome> batch, std::span<const std::int64_t> deactivate = {});

 protected:
  // `item`'s update, fenced on its id and lease; the rows it changed (0: the fence failed).
  virtual int write_fenced(const outcome& item) = 0;
  // After `item`'s fenced write landed: what else the shape keeps of it.
  virtual void landed(const outcome& item) = 0;

  SQLite::Database& db_;

 private:
  // A dead row that stops its key records it (surge_stopped_key, the same table on either
  // shape), and the report says so.
  void stop_key_if_asked(const outcome& item, write_report& report);
  // For a fence that matched nothing: whether the row is still in the queue at all.
  bool row_exists(std::int64_t delivery_id);

  std::unique_ptr<SQLite::Statement> stop_key_;  // prepared on first use
  attempt_recorder attempts_;
  SQLite::Statement deactivate_;
  SQLite::Statement exists_;
};

// seed000: status and the diagnostic columns Surge adds to webhook_delivery. Each row update is
// fenced on `id = ? AND locked_until = lease` and sets locked_until = 0.
class outcome_writer final : public outcome_applier {
 public:
  explicit outcome_writer(SQLite::Database& db);
  ~outcome_writer() override;

 private:
  int write_fenced(const outcome& item) override;
  // A coalesced row: the row sent in its place stands for its history from now on.
  void landed(const outcome& item) override;

  SQLite::Statement done_;
  SQLite::Statement retry_;
  SQLite::Statement dead_;
  SQLite::Statement release_;
  SQLite::Statement coalesced_;
  SQLite::Statement stands_for_;
};

}  // namespace surge::storage::sqlite
