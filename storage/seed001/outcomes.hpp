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

  write_report apply(std::span<const outcome> batch,
                     std::span<const std::int64_t> deactivate) override;

 private:
  // Binds the outcome's own fields, then its id and fence; returns the rows changed.
  template <class BindFields>
  int fenced(SQLite::Statement& statement, const outcome& item, BindFields&& bind_fields);
  void write_note(const outcome& item);
  bool row_exists(std::int64_t delivery_id);

  SQLite::Statement delivered_;
  SQLite::Statement retry_;
  SQLite::Statement dead_;
  SQLite::Statement release_;
  SQLite::Statement note_;
  attempt_recorder attempts_;
  SQLite::Statement deactivate_;
  SQLite::Statement exists_;
};

}  // namespace surge::storage::sqlite::seed001
