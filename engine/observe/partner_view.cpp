#include "engine/observe/partner_view.hpp"

#include <algorithm>
#include <cstdio>
#include <unordered_map>

namespace surge::engine {

namespace {

// About ten seconds of once-a-second samples.
constexpr double smoothing_seconds = 10;
// Within this share of its pace, a partner is taken to be held back by its limit, not by us.
constexpr double at_limit_share = 0.8;

partner_state held_state(const std::string& kind) {
  if (kind == "refused_target") return partner_state::refused_target;
  if (kind == "credentials") return partner_state::credentials;
  if (kind == "deactivated") return partner_state::deactivated;
  if (kind == "circuit_open") return partner_state::circuit_open;
  return partner_state::paused;
}

std::string rate_text(double rate) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g/s", rate);
  return text;
}

// The state of a partner that is not held, from what its shard last published.
void judge_sending(partner_row& row, const subscriber_snapshot& s) {
  if (!s.active || s.rate_limit <= 0) {
    row.state = partner_state::inactive;
    row.reason = s.active ? "rate 0" : "disabled";
    return;
  }
  if (s.disowned) {
    row.state = partner_state::other_drain;
    row.reason = "another drain owns it";
    return;
  }
  if (s.circuit_open_since_unix) {
    row.state = partner_state::circuit_open;
    row.since_unix = *s.circuit_open_since_unix;
    row.reason = "circuit open: one probe per cool-down";
    return;
  }
  const bool busy = row.queued > 0 || s.in_flight > 0 || s.buffered > 0;
  if (s.announced && s.announced->paced && s.paced_rate < s.rate_limit) {
    row.state = partner_state::quota_paced;
    row.reason =
        "its announced quota allows " + rate_text(s.paced_rate) + " of " + rate_text(s.rate_limit);
  } else if (s.slowed) {
    row.state = partner_state::slowed;
    row.reason =
        "429/503 answers: paced at " + rate_text(s.paced_rate) + " of " + rate_text(s.rate_limit);
  } else if (!busy) {
    row.state = partner_state::idle;
  } else if (s.paced_rate > 0 &&
             s.achieved_rate >= at_limit_share * s.paced_rate * s.rows_per_request) {
    row.state = partner_state::at_limit;
  } else {
    row.state = partner_state::sending;
  }
}

// Queued rows over the slower of what the partner allows and what it takes. A partner that
// takes nothing while failing has no honest ETA.
std::optional<double> eta_of(const partner_row& row) {
  if (holds_rows(row.state)) return std::nullopt;
  if (row.queued <= 0) return 0.0;
  // A batching partner's limit counts requests; its rows go up to a batch at a time.
  double rate = row.paced_rate * row.rows_per_request;
  if (row.achieved_rate > 0) {
    rate = rate > 0 ? std::min(rate, row.achieved_rate) : row.achieved_rate;
  } else if (row.failed > 0) {
    return std::nullopt;
  }
  if (rate <= 0) return std::nullopt;
  return static_cast<double>(row.queued) / rate;
}

}  // namespace

void smoothed_rate::sample(std::int64_t total, double now_seconds) {
  if (last_at_ < 0 || now_seconds <= last_at_) {
    if (last_at_ < 0) {
      last_total_ = total;
      last_at_ = now_seconds;
    }
    return;
  }
  const double elapsed = now_seconds - last_at_;
  const double instant = static_cast<double>(total - last_total_) / elapsed;
  // The first interval is taken whole: smoothing up from zero would read as a slow partner and
  // an ETA far too long for the first ten seconds.
  const double weight = measured_ ? std::min(1.0, elapsed / smoothing_seconds) : 1.0;
  measured_ = true;
  value_ += weight * (instant - value_);
  last_total_ = total;
  last_at_ = now_seconds;
}

const char* partner_state_name(partner_state state) {
  switch (state) {
    case partner_state::refused_target: return "refused_target";
    case partner_state::credentials: return "credentials";
    case partner_state::deactivated: return "deactivated";
    case partner_state::circuit_open: return "circuit_open";
    case partner_state::paused: return "paused";
    case partner_state::inactive: return "inactive";
    case partner_state::other_drain: return "other_drain";
    case partner_state::slowed: return "slowed";
    case partner_state::quota_paced: return "quota_paced";
    case partner_state::sending: return "sending";
    case partner_state::at_limit: return "at_limit";
    case partner_state::idle: return "idle";
  }
  return "idle";
}

bool holds_rows(partner_state state) { return state <= partner_state::other_drain; }

std::vector<partner_row> partner_rows(const partner_inputs& inputs) {
  std::unordered_map<std::int64_t, partner_row> rows;
  auto row_of = [&](std::int64_t id) -> partner_row& {
    auto& row = rows[id];
    row.id = id;
    return row;
  };
  if (inputs.queued) {
    for (const auto& q : *inputs.queued) {
      auto& row = row_of(q.id);
      row.queued = q.queued;
      row.overdue = q.overdue;
    }
  }
  std::unordered_map<std::int64_t, const subscriber_snapshot*> snapshots;
  for (const auto& s : inputs.subscribers) {
    snapshots[s.id] = &s;
    auto& row = row_of(s.id);
    row.rate_limit = s.rate_limit;
    row.paced_rate = s.paced_rate;
    row.rows_per_request = s.rows_per_request;
    row.achieved_rate = s.achieved_rate;
    row.in_flight = s.in_flight;
    row.delivered = s.delivered;
    row.failed = s.failed;
    row.last_error = s.last_error;
    row.last_error_unix = s.last_error_unix;
    // Until the queue is sampled, rows the shard holds are all that is known to be queued.
    if (!inputs.queued) row.queued = s.buffered;
  }
  std::unordered_map<std::int64_t, const held_subscriber*> holds;
  for (const auto& h : inputs.held) {
    holds[h.id] = &h;
    row_of(h.id);
  }

  std::vector<partner_row> out;
  out.reserve(rows.size());
  for (auto& [id, row] : rows) {
    if (const auto held = holds.find(id); held != holds.end()) {
      row.state = held_state(held->second->kind);
      row.reason = held->second->reason;
      row.until_unix = held->second->until_unix;
      if (const auto s = snapshots.find(id);
          s != snapshots.end() && s->second->circuit_open_since_unix) {
        row.since_unix = *s->second->circuit_open_since_unix;
      }
    } else if (const auto s = snapshots.find(id); s != snapshots.end()) {
      judge_sending(row, *s->second);
    } else {
      // Queued rows of a subscriber no shard of this drain knows: disabled before the drain
      // started, or outside what it loads.
      row.state = partner_state::inactive;
      row.reason = "not sent by this drain";
    }
    row.eta_seconds = eta_of(row);
    // A partner with nothing queued, nothing sent and no hold has nothing to tell.
    const bool quiet = row.queued == 0 && row.in_flight == 0 && row.delivered + row.failed == 0;
    if (quiet && holds.find(id) == holds.end()) continue;
    out.push_back(std::move(row));
  }
  std::sort(out.begin(), out.end(), [](const partner_row& a, const partner_row& b) {
    if (a.state != b.state) return a.state < b.state;
    if (a.queued != b.queued) return a.queued > b.queued;
    return a.id < b.id;
  });
  return out;
}

partner_totals totals_of(const std::vector<partner_row>& rows) {
  partner_totals totals;
  bool eta_known = true;
  double eta = 0;
  for (const auto& row : rows) {
    if (holds_rows(row.state)) {
      totals.held_rows += row.queued;
      if (row.queued > 0) ++totals.held_partners;
      continue;
    }
    totals.backlog += row.queued;
    if (!row.eta_seconds) {
      if (row.queued > 0) eta_known = false;
      continue;
    }
    eta = std::max(eta, *row.eta_seconds);
  }
  if (eta_known) totals.eta_seconds = eta;
  return totals;
}

std::string clock_text(std::optional<double> seconds) {
  if (!seconds) return "--:--";
  const auto whole = static_cast<long long>(*seconds + 0.5);
  char text[32];
  if (whole >= 3600) {
    std::snprintf(text, sizeof text, "%lld:%02lld:%02lld", whole / 3600, whole / 60 % 60,
                  whole % 60);
  } else {
    std::snprintf(text, sizeof text, "%lld:%02lld", whole / 60, whole % 60);
  }
  return text;
}

}  // namespace surge::engine
