#include "engine/observe/metrics_text.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <vector>

#include "engine/observe/exposition.hpp"
#include "engine/observe/origin_series.hpp"

namespace surge::engine {

namespace {

void line(std::string& out, const char* text) { out += text; }

using exposition::header;
using exposition::value_line;

void render_histogram(std::string& out, const char* name, const char* help, const histogram& h) {
  header(out, name, "histogram", help);
  const auto snap = h.read();
  for (std::size_t i = 0; i < snap.bounds.size(); ++i) {
    char le[32];
    std::snprintf(le, sizeof le, "%g", snap.bounds[i]);
    value_line(out, std::string(name) + "_bucket{le=\"" + le + "\"}",
               static_cast<double>(snap.cumulative[i]));
  }
  const auto count = static_cast<double>(snap.cumulative.back());
  value_line(out, std::string(name) + "_bucket{le=\"+Inf\"}", count);
  value_line(out, std::string(name) + "_sum", snap.sum);
  value_line(out, std::string(name) + "_count", count);
}

// The sampled queue: the subscribers with the most queued rows, which are not always the
// busiest (a partner that answers nothing delivers nothing and queues the most).
void render_queue(std::string& out, const drain_metrics& metrics, std::size_t top) {
  auto sampled = metrics.queue();
  if (!sampled) return;
  auto& view = *sampled;
  header(out, "surge_overdue_rows", "gauge",
         "Rows of the drained subscribers due for more than 60 s and not delivered "
         "(sampled every 5 s).");
  value_line(out, "surge_overdue_rows", static_cast<double>(view.overdue_rows));
  auto& subs = view.subscribers;
  std::sort(subs.begin(), subs.end(),
            [](const auto& a, const auto& b) { return a.queued > b.queued; });
  if (subs.size() > top) subs.resize(top);
  std::sort(subs.begin(), subs.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  header(out, "surge_subscriber_queued_rows", "gauge",
         "Pending or retry rows, per subscriber (those with the most only; sampled every 5 s).");
  for (const auto& sub : subs) {
    value_line(out, "surge_subscriber_queued_rows{subscriber=\"" + std::to_string(sub.id) + "\"}",
               static_cast<double>(sub.queued));
  }
  header(out, "surge_subscriber_overdue_rows", "gauge",
         "Rows due for more than 60 s, per subscriber (those with the most queued only).");
  for (const auto& sub : subs) {
    value_line(out, "surge_subscriber_overdue_rows{subscriber=\"" + std::to_string(sub.id) + "\"}",
               static_cast<double>(sub.overdue));
  }
}

// The partners' announced quotas beside the configured limits: where they disagree, the pace
// follows the partner (downwards only).
void render_announced(std::string& out, const std::vector<subscriber_snapshot>& subscribers) {
  struct series {
    const char* name;
    const char* help;
    std::optional<double> (*value)(const announced_snapshot&);
  };
  static constexpr series announced[] = {
      {"surge_subscriber_announced_quota",
       "Requests per window the partner announces (RateLimit-Policy q or X-RateLimit-Limit).",
       [](const announced_snapshot& a) { return a.quota; }},
      {"surge_subscriber_announced_window_seconds",
       "The window of the partner's announced quota (RateLimit-Policy w).",
       [](const announced_snapshot& a) { return a.window_seconds; }},
      {"surge_subscriber_announced_remaining",
       "Requests the partner last said are left until its window resets.",
       [](const announced_snapshot& a) { return std::optional<double>(a.remaining); }},
      {"surge_subscriber_announced_reset_seconds",
       "Seconds until the partner's announced window resets.",
       [](const announced_snapshot& a) { return std::optional<double>(a.reset_in); }},
  };
  for (const auto& s : announced) {
    header(out, s.name, "gauge", s.help);
    for (const auto& sub : subscribers) {
      if (!sub.announced) continue;
      const auto value = s.value(*sub.announced);
      if (!value) continue;
      value_line(out, std::string(s.name) + "{subscriber=\"" + std::to_string(sub.id) + "\"}",
                 *value);
    }
  }
}

// The partner view's state and ETA per partner, unhappy ones first, so that an alert can
// tell a partner held back by its own limit (expected in a spike) from one the drain is behind
// on.
void render_partners(std::string& out, const drain_metrics& metrics, std::size_t top) {
  auto rows = metrics.partners();
  const auto totals = totals_of(rows);
  header(out, "surge_held_rows", "gauge",
         "Queued rows of partners that cannot send now (held, paused, inactive), apart from "
         "surge_backlog_rows' sendable ones (sampled every 5 s).");
  value_line(out, "surge_held_rows", static_cast<double>(totals.held_rows));
  header(out, "surge_eta_seconds", "gauge",
         "Seconds until the sendable backlog is delivered: the largest partner's queued rows "
         "over the slower of its pace and what it achieves; absent while not known.");
  if (totals.eta_seconds) value_line(out, "surge_eta_seconds", *totals.eta_seconds);
  header(out, "surge_retry_max_age_seconds", "gauge",
         "Rows older than this are dead-lettered instead of retried.");
  value_line(out, "surge_retry_max_age_seconds", metrics.retry_max_age_seconds.load());
  if (rows.size() > top) rows.resize(top);
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  header(out, "surge_subscriber_state", "gauge",
         "1 for each partner's state: sending (below its limit), at_limit, slowed (429/503), "
         "quota_paced, circuit_open, paused, deactivated, credentials, refused_target, inactive, "
         "other_drain, idle (the unhappiest partners first, up to --metrics-subscribers).");
  for (const auto& row : rows) {
    value_line(out,
               "surge_subscriber_state{subscriber=\"" + std::to_string(row.id) + "\",state=\"" +
                   partner_state_name(row.state) + "\"}",
               1);
  }
  header(out, "surge_subscriber_eta_seconds", "gauge",
         "Seconds until a partner's queued rows are delivered at the slower of its pace and "
         "what it achieves; absent while it is held or takes nothing.");
  for (const auto& row : rows) {
    if (!row.eta_seconds) continue;
    value_line(out, "surge_subscriber_eta_seconds{subscriber=\"" + std::to_string(row.id) + "\"}",
               *row.eta_seconds);
  }
}

}  // namespace

std::string metrics_text(const drain_metrics& metrics, std::size_t top) {
  std::string out;
  out.reserve(8192);
  const auto& c = metrics.counters;
  auto counter = [&](const char* name, const char* help, std::int64_t value) {
    header(out, name, "counter", help);
    value_line(out, name, static_cast<double>(value));
  };
  auto gauge = [&](const char* name, const char* help, double value) {
    header(out, name, "gauge", help);
    value_line(out, name, value);
  };

  header(out, "surge_deliveries_total", "counter",
         "Rows finished by outcome: done, retry (rescheduled), dead, released (lease given back), "
         "coalesced (done without a request: a newer row with the same key was sent instead).");
  value_line(out, "surge_deliveries_total{outcome=\"done\"}",
             static_cast<double>(c.delivered.load()));
  value_line(out, "surge_deliveries_total{outcome=\"retry\"}",
             static_cast<double>(c.retried.load()));
  value_line(out, "surge_deliveries_total{outcome=\"dead\"}", static_cast<double>(c.dead.load()));
  value_line(out, "surge_deliveries_total{outcome=\"released\"}",
             static_cast<double>(c.released.load()));
  value_line(out, "surge_deliveries_total{outcome=\"coalesced\"}",
             static_cast<double>(c.coalesced.load()));

  header(out, "surge_attempts_total", "counter", "HTTP attempts by status class.");
  static constexpr const char* class_names[] = {"2xx", "3xx", "4xx", "429", "5xx", "transport"};
  for (std::size_t i = 0; i < metrics.attempts_by_class.size(); ++i) {
    value_line(out, std::string("surge_attempts_total{class=\"") + class_names[i] + "\"}",
               static_cast<double>(metrics.attempts_by_class[i].load()));
  }
  counter("surge_claimed_rows_total", "Rows leased from the queue.", c.claimed.load());
  counter("surge_keys_stopped_total",
          "Keys of ordered subscribers stopped by a dead row: their later rows wait for the "
          "operator (surge dead replay, or surge subscriber resume-key).",
          c.keys_stopped.load());
  counter("surge_batch_posts_total",
          "Requests that carried a batch (subscribers with batch_max > 1); each is one attempt.",
          c.batch_posts.load());
  counter("surge_batch_rows_total", "Rows carried by batch requests.", c.batched_rows.load());
  counter("surge_lost_leases_total",
          "Outcome writes whose lease fence matched nothing (another drainer took the row).",
          c.lost_leases.load());
  counter("surge_refused_outcomes_total",
          "Outcomes the database refused for the row's own sake (a constraint, a trigger, a value "
          "out of range): written as dead instead, or left to the row's lease.",
          c.refused_outcomes.load());
  counter("surge_refused_target_holds_total",
          "Times a subscriber was held because its URL resolved only to addresses the target "
          "policy refuses (loopback, private, link-local, metadata): its rows stay queued.",
          c.refused_target_holds.load());
  counter("surge_fresh_connection_retries_total",
          "Requests resent once on a new connection after a stale keep-alive one failed.",
          c.fresh_retries.load());
  counter("surge_storage_errors_total", "Failed claims, writes or reads on the queue file.",
          c.storage_errors.load());
  header(out, "surge_tls_handshakes_total", "counter",
         "Completed TLS handshakes; resumed=\"true\": a session of an earlier connection to "
         "the origin was resumed.");
  value_line(out, "surge_tls_handshakes_total{resumed=\"false\"}",
             static_cast<double>(metrics.tls_handshakes_full.load()));
  value_line(out, "surge_tls_handshakes_total{resumed=\"true\"}",
             static_cast<double>(metrics.tls_handshakes_resumed.load()));
  counter("surge_wal_commits_total",
          "Commits of the storage thread's connection that wrote to the WAL.",
          c.wal_commits.load());
  counter("surge_wal_frames_total", "WAL frames (pages) written by the storage thread's commits.",
          c.wal_frames.load());
  counter("surge_new_row_wakes_total",
          "Times rows queued by another connection woke their subscribers before the idle poll.",
          c.new_row_wakes.load());
  header(out, "surge_token_wait_seconds_total", "counter",
         "Time buffered rows spent waiting for their subscriber's token bucket.");
  value_line(out, "surge_token_wait_seconds_total", metrics.token_wait_seconds.load());

  gauge("surge_in_flight_requests", "Requests sent and not yet answered.",
        static_cast<double>(c.in_flight.load()));
  gauge("surge_buffered_rows", "Claimed rows waiting for a token or a slot.",
        static_cast<double>(c.buffered.load()));
  gauge("surge_open_connections", "Open HTTP(S) connections.",
        static_cast<double>(metrics.open_connections.load()));
  gauge("surge_owned_subscribers",
        "Subscribers this drain owns through ownership leases (only the owner sends).",
        static_cast<double>(c.owned_subscribers.load()));
  gauge("surge_backlog_rows",
        "Due or leased rows of the drained subscribers (refreshed every few seconds).",
        static_cast<double>(std::max<std::int64_t>(0, c.backlog.load())));
  gauge("surge_oldest_due_age_seconds", "Age of the oldest due row (refreshed every few seconds).",
        metrics.oldest_due_age.load());

  render_histogram(out, "surge_attempt_duration_seconds", "Duration of one HTTP attempt.",
                   metrics.attempt_duration);
  render_histogram(out, "surge_due_lag_seconds",
                   "From a row being due to its first attempt starting.", metrics.due_lag);
  render_histogram(out, "surge_claim_batch_rows", "Rows per claim transaction.",
                   metrics.claim_rows);
  render_histogram(out, "surge_claim_duration_seconds", "Duration of a claim transaction.",
                   metrics.claim_duration);
  render_histogram(out, "surge_commit_batch_rows", "Outcomes per write transaction.",
                   metrics.commit_rows);
  render_histogram(out, "surge_commit_duration_seconds", "Duration of an outcome transaction.",
                   metrics.commit_duration);

  std::vector<subscriber_snapshot> subscribers;
  std::vector<held_subscriber> held;
  std::int64_t paused = 0, failing = 0, open_circuits = 0, quota_paced = 0, in_flight_limit = 0;
  for (const auto& view : metrics.shard_views()) {
    held.insert(held.end(), view.held.begin(), view.held.end());
    paused += view.paused_subscribers;
    failing += view.failing_subscribers;
    open_circuits += view.open_circuits;
    quota_paced += view.quota_paced;
    in_flight_limit += view.in_flight_limit;
    subscribers.insert(subscribers.end(), view.subscribers.begin(), view.subscribers.end());
  }
  gauge("surge_in_flight_limit",
        "Requests in flight the shards' adaptive limits admit now, summed: what the partners' "
        "latency and this process's CPU carry, at most --max-in-flight.",
        static_cast<double>(in_flight_limit));
  gauge("surge_subscribers_paused",
        "Subscribers paused by Retry-After, or until their partner's spent quota resets.",
        static_cast<double>(paused));
  gauge("surge_subscribers_quota_paced",
        "Subscribers paced below their configured limit by the quota their partner announces.",
        static_cast<double>(quota_paced));
  gauge("surge_subscribers_failing", "Subscribers whose last attempt failed.",
        static_cast<double>(failing));
  gauge("surge_subscribers_circuit_open",
        "Subscribers whose circuit is open: one probe per cool-down, nothing claimed.",
        static_cast<double>(open_circuits));

  // Which partner cannot send, and why, so that an alert can name it: a series per held
  // subscriber, the lowest ids first, no more than the busiest subscribers' count.
  header(out, "surge_subscriber_held", "gauge",
         "1 for a subscriber that cannot send now, by reason: refused_target, credentials, "
         "deactivated (it answered 410 Gone), circuit_open or paused (Retry-After, its "
         "partner's announced quota).");
  std::sort(held.begin(), held.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  if (held.size() > top) held.resize(top);
  for (const auto& h : held) {
    value_line(out,
               "surge_subscriber_held{subscriber=\"" + std::to_string(h.id) + "\",reason=\"" +
                   h.kind + "\"}",
               1);
  }

  // Bounded cardinality: the busiest subscribers only, and only those that did something.
  std::erase_if(subscribers, [](const subscriber_snapshot& s) {
    return s.delivered + s.failed + s.in_flight + s.buffered == 0;
  });
  exposition::keep_top(
      subscribers, top,
      [](const auto& a, const auto& b) {
        return a.delivered + a.failed + a.buffered > b.delivered + b.failed + b.buffered;
      },
      [](const auto& a, const auto& b) { return a.id < b.id; });
  struct series {
    const char* name;
    const char* type;
    const char* help;
    double (*value)(const subscriber_snapshot&);
  };
  static constexpr series per_subscriber[] = {
      {"surge_subscriber_delivered_total", "counter",
       "Rows delivered, per subscriber (busiest only).",
       [](const subscriber_snapshot& s) { return static_cast<double>(s.delivered); }},
      {"surge_subscriber_failed_attempts_total", "counter",
       "Failed attempts, per subscriber (busiest only).",
       [](const subscriber_snapshot& s) { return static_cast<double>(s.failed); }},
      {"surge_subscriber_in_flight_requests", "gauge",
       "Requests in flight, per subscriber (busiest only).",
       [](const subscriber_snapshot& s) { return static_cast<double>(s.in_flight); }},
      {"surge_subscriber_buffered_rows", "gauge", "Buffered rows, per subscriber (busiest only).",
       [](const subscriber_snapshot& s) { return static_cast<double>(s.buffered); }},
      {"surge_subscriber_rate_limit", "gauge", "Configured requests per second (busiest only).",
       [](const subscriber_snapshot& s) { return s.rate_limit; }},
      {"surge_subscriber_paced_rate", "gauge",
       "Requests per second in force: the configured rate, or less after 429/503 answers or "
       "while the partner's announced quota would not last at it (busiest only).",
       [](const subscriber_snapshot& s) { return s.paced_rate; }},
      {"surge_subscriber_achieved_rate", "gauge",
       "Rows delivered per second, smoothed over about 10 s (busiest only).",
       [](const subscriber_snapshot& s) { return s.achieved_rate; }},
  };
  for (const auto& s : per_subscriber) {
    header(out, s.name, s.type, s.help);
    for (const auto& sub : subscribers) {
      value_line(out, std::string(s.name) + "{subscriber=\"" + std::to_string(sub.id) + "\"}",
                 s.value(sub));
    }
  }
  header(out, "surge_subscriber_delivery_latency_seconds", "summary",
         "From a row's created_at to the 2xx that delivered it, per subscriber (busiest only).");
  for (const auto& sub : subscribers) {
    const std::string label = "{subscriber=\"" + std::to_string(sub.id) + "\"}";
    value_line(out, "surge_subscriber_delivery_latency_seconds_sum" + label,
               sub.delivery_latency_sum);
    value_line(out, "surge_subscriber_delivery_latency_seconds_count" + label,
               static_cast<double>(sub.delivered));
  }
  render_announced(out, subscribers);
  render_origin_series(out, metrics.origins(), top);
  render_queue(out, metrics, top);
  render_partners(out, metrics, top);
  line(out, "# HELP surge_info Build information.\n# TYPE surge_info gauge\n");
  line(out, "surge_info{version=\"0.1.0\"} 1\n");
  return out;
}

}  // namespace surge::engine
