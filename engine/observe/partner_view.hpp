#pragma once
// The operator's one view of the partners: for each, its state and why, its rows queued or
// held, its pace and an ETA (sans-I/O: snapshots in, rows out). The status line, the exit
// summary, /metrics and the live page at / all read these rows, so they never disagree.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/observe/snapshots.hpp"

namespace surge::engine {

// Rows delivered per second, smoothed over about ten seconds of samples: what the partner
// really takes, as opposed to the limit it allows.
class smoothed_rate {
 public:
  void sample(std::int64_t total, double now_seconds);
  double value() const { return value_; }

 private:
  double value_ = 0;
  std::int64_t last_total_ = 0;
  double last_at_ = -1;
  bool measured_ = false;
};

// Held states first: a partner whose rows cannot go now, whatever the drain does.
enum class partner_state {
  refused_target,
  credentials,
  deactivated,
  circuit_open,
  paused,
  inactive,
  other_drain,
  slowed,
  quota_paced,
  sending,
  at_limit,
  idle,
};

// The metric label and the page's word for a state.
const char* partner_state_name(partner_state state);
// Whether its rows wait for something other than this drain's sending (reported apart from the
// backlog, and left out of the ETA).
bool holds_rows(partner_state state);

struct partner_row {
  std::int64_t id = 0;
  partner_state state = partner_state::idle;
  std::string reason;     // for people, empty when the state says it all
  double since_unix = 0;  // when an open circuit opened (0: not known or not open)
  double until_unix = 0;  // when a pause ends (0: not by itself)
  double rate_limit = 0;  // configured requests per second (0: not known here)
  double paced_rate = 0;  // requests per second in force now
  int rows_per_request = 1;
  double achieved_rate = 0;
  std::int64_t queued = 0;  // pending or retrying rows (the queue's last sample)
  std::int64_t overdue = 0;
  std::int64_t in_flight = 0;
  std::int64_t delivered = 0;
  std::int64_t failed = 0;
  std::string last_error;
  double last_error_unix = 0;
  std::optional<double> eta_seconds;  // none while held, or while nothing gets through
};

struct partner_totals {
  std::int64_t backlog = 0;           // queued rows of partners that can send
  std::int64_t held_rows = 0;         // queued rows of partners that cannot send now
  std::int64_t held_partners = 0;     // those partners, counted when they hold rows
  std::optional<double> eta_seconds;  // the largest partner ETA; none when one is unknown
};

struct partner_inputs {
  std::vector<subscriber_snapshot> subscribers;
  std::vector<held_subscriber> held;
  std::optional<std::vector<queued_snapshot>> queued;  // none until the queue was sampled
};

// Unhappy partners first (by state), then the most queued.
std::vector<partner_row> partner_rows(const partner_inputs& inputs);
partner_totals totals_of(const std::vector<partner_row>& rows);

// A duration for people: 0:42, 12:05, 3:02:10; "--:--" for none.
std::string clock_text(std::optional<double> seconds);

}  // namespace surge::engine
