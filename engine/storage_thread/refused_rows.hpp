#pragma once
// Rows whose outcome the database refused (a constraint, a trigger): the refusal stays the row's.
// Such a row is dead-lettered with the reason; a row refused even that (or whose refused outcome
// was already a dead-letter or a release) is quarantined: sending it again when its lease ends
// would only be refused again, and a partner that answered 2xx would get it once per lease, so
// this drain never claims it again and it stays in the queue as it was. Pure state: the storage
// core finds the refused row and writes its dead-letter; this decides what becomes of it.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "storage/claims.hpp"
#include "storage/outcomes.hpp"

namespace surge::engine {

class refused_rows {
 public:
  // Why the row's outcome was refused, short enough for its last_error and a log line.
  static std::string reason(std::string_view refusal);
  // The dead-letter to write for `refused`, or nullopt when there is none to try: it was a
  // dead-letter or a release already, so the row is quarantined at once.
  static std::optional<storage::outcome> dead_letter(const storage::outcome& refused,
                                                     const std::string& reason);

  void quarantine(std::int64_t delivery_id, const std::string& reason) {
    quarantined_.emplace(delivery_id, reason);
  }
  // Claimed rows without the quarantined ones.
  void drop_from(std::vector<storage::claimed_row>& rows) const;
  // Outstanding rows of the queue that this drain can still finish: quarantined rows stay
  // unfinished, so they are not waited for. (One another program finished meanwhile makes this
  // an underestimate.)
  std::int64_t finishable(std::int64_t outstanding) const;
  // Row id and the reason, for the drain's summary.
  const std::map<std::int64_t, std::string>& quarantined() const { return quarantined_; }

 private:
  std::map<std::int64_t, std::string> quarantined_;
};

}  // namespace surge::engine
