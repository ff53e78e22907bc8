#pragma once
// The outcome writer of a seed001 queue (storage/outcomes.hpp's contract). Private to storage/.
#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>

#include "storage/sqlite/outcomes.hpp"

namespace surge::storage::sqlite::seed001 {

class outcome_writer final : public outcome_applier {
 public:
  explicit outcome_writer(SQLite::Database& db);
  ~outcome_writer() override;

 private:
  int write_fenced(const outcome& item) override;
  // A retry or a dead row: why, in surge_delivery_note (the shape has no such columns).
  void landed(const outcome& item) override;
  // Binds the outcome's own fields, then its id and fence; returns the rows changed.
  template <class BindFields>
  int fenced(SQLite::Statement& statement, const outcome& item, BindFields&& bind_fields);
  void write_note(const outcome& item);

  SQLite::Statement delivered_;
  SQLite::Statement retry_;
  SQLite::Statement dead_;
  SQLite::Statement release_;
  SQLite::Statement note_;
};

}  // namespace surge::storage::sqlite::seed001
