#include "engine/drain.hpp"

#include <csignal>
#include <cstdio>
#include <memory>
#include <optional>
#include <thread>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include "engine/observe/counters.hpp"
#include "engine/net/http_client.hpp"
#include "engine/observe/log.hpp"
#include "engine/observe/metrics.hpp"
#include "engine/observe/metrics_text.hpp"
#include "engine/observe/live_page.hpp"
#include "engine/observe/metrics_server.hpp"
#include "engine/storage_thread/coalesce_sweeper.hpp"
#include "engine/storage_thread/queue_sampler.hpp"
#include "engine/shard/shard.hpp"
#include "engine/stop_sequence.hpp"
#include "engine/net/tls_sessions.hpp"
#include "engine/storage_thread/storage_worker.hpp"
#include "proto/clock.hpp"
#include "storage/claims.hpp"
#include "storage/connection.hpp"
#include "storage/maintenance.hpp"
#include "storage/schema.hpp"

namespace surge::engine {

namespace asio = boost::asio;

namespace {

// What the queue holds, as the partner view tells it: the sendable backlog and the rows held
// apart, the largest partner ETA, and who is unhappy. Until the queue is first sampled, the
// storage thread's count stands in for the backlog and the ETA is not known.
struct queue_picture {
  std::string backlog;
  std::int64_t held_rows = 0;
  std::int64_t held_partners = 0;
  std::optional<double> eta;
  std::string unhappy;  // "7 circuit_open, 12 slowed, +3 more"
};

queue_picture picture_of(const drain_metrics& metrics) {
  queue_picture out;
  const auto rows = metrics.partners();
  const auto totals = totals_of(rows);
  const auto counted = metrics.counters.backlog.load();
  if (metrics.queue_sampled()) {
    out.backlog = std::to_string(totals.backlog);
    out.held_rows = totals.held_rows;
    out.held_partners = totals.held_partners;
    out.eta = totals.eta_seconds;
  } else {
    out.backlog = counted < 0 ? "?" : std::to_string(counted);
  }
  constexpr std::size_t named = 3;
  std::size_t unhappy = 0;
  for (const auto& row : rows) {
    if (row.state >= partner_state::sending) break;  // sorted unhappiest first
    if (unhappy++ < named) {
      if (!out.unhappy.empty()) out.unhappy += ", ";
      out.unhappy += std::to_string(row.id) + " " + partner_state_name(row.state);
    }
  }
  if (unhappy > named) out.unhappy += ", +" + std::to_string(unhappy - named) + " more";
  if (out.unhappy.empty()) out.unhappy = "none";
  return out;
}

std::string progress_line(const drain_metrics& metrics, double rate) {
  const auto& counters = metrics.counters;
  const auto picture = picture_of(metrics);
  char line[512];
  std::snprintf(line, sizeof line,
                "progress: delivered=%lld (%.0f/s) retried=%lld dead=%lld in_flight=%lld "
                "buffered=%lld backlog=%s held=%lld eta=%s unhappy=%s lost_leases=%lld",
                static_cast<long long>(counters.delivered.load()), rate,
                static_cast<long long>(counters.retried.load()),
                static_cast<long long>(counters.dead.load()),
                static_cast<long long>(counters.in_flight.load()),
                static_cast<long long>(counters.buffered.load()), picture.backlog.c_str(),
                static_cast<long long>(picture.held_rows), clock_text(picture.eta).c_str(),
                picture.unhappy.c_str(), static_cast<long long>(counters.lost_leases.load()));
  return line;
}

std::string status_text(const drain_metrics& metrics, double rate) {
  const auto& c = metrics.counters;
  const auto picture = picture_of(metrics);
  char line[512];
  std::snprintf(line, sizeof line,
                "surge: backlog %s | held %lld (%lld partners) | %.0f delivered/s | "
                "unhappy: %s | in flight %lld | done %lld dead %lld | ETA %s",
                picture.backlog.c_str(), static_cast<long long>(picture.held_rows),
                static_cast<long long>(picture.held_partners), rate, picture.unhappy.c_str(),
                static_cast<long long>(c.in_flight.load()),
                static_cast<long long>(c.delivered.load()), static_cast<long long>(c.dead.load()),
                clock_text(picture.eta).c_str());
  return line;
}

// Whose rows stay queued at exit, and why: a fresh count of the queue beside the shards' last
// word on each partner. Nothing when the queue cannot be read any more (its failure is
// reported on its own).
std::vector<partner_row> partners_left(drain_metrics& metrics,
                                       const queue_sampler_config& sampling) {
  try {
    metrics.publish_queue(sample_queue(sampling));
  } catch (const std::exception&) {
    return {};
  }
  auto rows = metrics.partners();
  std::erase_if(rows, [](const partner_row& row) { return row.queued <= 0; });
  return rows;
}

// Drains on one queue share its subscribers through ownership leases (storage/ownership.hpp) and
// spend one persisted bucket per subscriber, so overlapping is safe; saying so at the start
// explains why this drain may send nothing to some subscribers until their owner lets go.
// On seed001, that shape's published retry rules with whatever the operator set on top; on
// seed000, config.retry already holds Surge's own.
void apply_shape_retry_rules(drain_config& config) {
  if (config.storage.shape != storage::queue_shape::seed001) return;
  auto rules = storage::retry_defaults(*config.storage.shape);
  const auto& given = config.retry_given;
  if (given.max_attempts) rules.max_attempts = config.retry.max_attempts;
  if (given.max_age) rules.max_age = config.retry.max_age;
  if (given.base_delay) rules.base_delay = config.retry.base_delay;
  if (given.max_delay) rules.max_delay = config.retry.max_delay;
  config.retry = rules;
}

void note_other_drainers(storage::connection& db, const proto::id_set& subscribers) {
  const auto holders = storage::other_live_owners(db, proto::unix_now(), subscribers,
                                                  storage::default_lease_owner());
  if (holders.empty()) return;
  constexpr std::size_t ids_shown = 20;
  std::string text;
  for (const auto& holder : holders) {
    if (!text.empty()) text += "; ";
    text += holder.owner + " holds " + std::to_string(holder.rows) + " leased rows of subscriber" +
            (holder.subscribers.size() == 1 ? " " : "s ");
    for (std::size_t i = 0; i < holder.subscribers.size() && i < ids_shown; ++i) {
      text += (i ? "," : "") + std::to_string(holder.subscribers[i]);
    }
    if (holder.subscribers.size() > ids_shown) {
      text += ",... (" + std::to_string(holder.subscribers.size()) + " in all)";
    }
  }
  log_info("another surge drain is live on the same subscribers (" + text +
           "): the drains share them, each subscriber sent by its one owner at a time within its "
           "one rate limit (see docs/operations.md, \"Several drains on one queue\")");
}

}  // namespace

int shard_count(const drain_config& config) {
  return config.threads > 0 ? config.threads
                            : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

drain_summary run_drain(const drain_config& input) {
  drain_config config = input;
  config.threads = shard_count(config);
  {
    // Migrations are additive, so running them here keeps a drain usable on a database that
    // only the steady-state drainer has touched so far.
    storage::connection db({.location = config.storage.db_path,
                            .busy_timeout = config.storage.busy_timeout,
                            .create_if_missing = false,
                            .shape = config.storage.shape});
    // A queue of no shape Surge can use stops the drain here (storage::error, bad_shape), before
    // anything could report it drained while its rows wait.
    const auto migrated = storage::migrate_reporting(db);
    if (migrated.changed()) {
      log_info("migrate: " + migrated.describe() + " to " +
               storage::printable_location(config.storage.db_path) + " (schema version " +
               std::to_string(migrated.version_before) + " -> " + std::to_string(migrated.version) +
               ")");
    }
    config.storage.shape = db.shape();
    apply_shape_retry_rules(config);
    note_other_drainers(db, config.subscribers);
  }

  drain_metrics metrics(static_cast<std::size_t>(config.threads));
  drain_counters& counters = metrics.counters;
  auto tls = make_client_tls_context(config.http);
  storage_worker storage(config, metrics);
  std::vector<std::unique_ptr<shard>> shards;
  std::vector<shard_endpoint*> endpoints;
  for (int i = 0; i < config.threads; ++i) {
    shards.push_back(std::make_unique<shard>(i, config.threads, config, storage, tls, metrics));
    endpoints.push_back(shards.back().get());
  }
  storage.attach(endpoints);

  asio::io_context control;
  // SIGHUP too: a dropped SSH session must stop the drain as Ctrl-C does, leases released and
  // the summary written, not kill it with its rows leased.
  asio::signal_set signals(control, SIGINT, SIGTERM, SIGHUP);
  asio::steady_timer stop_timer(control);
  asio::steady_timer progress_timer(control);
  asio::steady_timer finish_poll(control);
  drain_summary summary;
  const auto started = std::chrono::steady_clock::now();

  stop_sequence stop(
      {.grace = config.shutdown_grace, .final_write_window = config.storage.final_write_window});
  std::function<void(stop_sequence::action)> perform;
  auto arm_stop_timer = [&] {
    const auto deadline = stop.next_deadline();
    if (!deadline) return;
    stop_timer.expires_at(*deadline);
    stop_timer.async_wait([&](boost::system::error_code ec) {
      if (!ec) perform(stop.on_timer(std::chrono::steady_clock::now()));
    });
  };
  std::function<void()> poll_finished;
  auto request_stop = [&](const char* why, bool by_signal) {
    const auto next = stop.on_stop(std::chrono::steady_clock::now(), by_signal);
    if (next == stop_sequence::action::begin_stop) log_info(std::string("stopping: ") + why);
    perform(next);
  };
  perform = [&](stop_sequence::action next) {
    switch (next) {
      case stop_sequence::action::none: return;
      case stop_sequence::action::begin_stop:
        storage.stop_claiming();
        for (auto& s : shards) s->begin_stop();
        stop_timer.cancel();  // the --duration timer, when that was not what stopped us
        arm_stop_timer();
        poll_finished();
        return;
      case stop_sequence::action::abandon_attempts:
        for (auto& s : shards) s->abandon();
        arm_stop_timer();
        return;
      case stop_sequence::action::abandon_writes: storage.abandon(); return;
      case stop_sequence::action::ignore_repeat:
        log_info("ignoring a repeated stop signal");
        return;
      case stop_sequence::action::exit_now: {
        // Leases expire on their own.
        const char message[] = "surge: second signal, exiting without finishing\n";
        [[maybe_unused]] auto ignored = ::write(2, message, sizeof message - 1);
        std::_Exit(3);
      }
    }
  };

  bool storage_finishing = false;
  poll_finished = [&] {
    bool all = true;
    for (auto& s : shards) all = all && s->finished();
    if (all && !storage_finishing) {
      storage_finishing = true;
      storage.finish(config.threads);
    }
    if (all && storage.finished()) {
      stop.finished();
      stop_timer.cancel();
      progress_timer.cancel();
      signals.cancel();
      control.stop();
      return;
    }
    finish_poll.expires_after(std::chrono::milliseconds(20));
    finish_poll.async_wait([&](boost::system::error_code ec) {
      if (!ec) poll_finished();
    });
  };

  std::function<void(boost::system::error_code, int)> on_signal = [&](boost::system::error_code ec,
                                                                      int signal_number) {
    if (ec) return;
    request_stop(signal_number == SIGINT   ? "SIGINT"
                 : signal_number == SIGHUP ? "SIGHUP (the terminal hung up)"
                                           : "SIGTERM",
                 true);
    signals.async_wait(on_signal);
  };
  signals.async_wait(on_signal);

  storage.on_drained([&] {
    asio::post(control, [&] {
      summary.drained = true;
      request_stop("queue drained", false);
    });
  });
  storage.on_fatal([&](std::string why) {
    asio::post(control, [&, why = std::move(why)] {
      summary.failure = why;
      request_stop("the queue cannot be drained any more", false);
    });
  });

  if (config.duration) {
    stop_timer.expires_after(*config.duration);
    stop_timer.async_wait([&](boost::system::error_code ec) {
      if (!ec) request_stop("duration reached", false);
    });
  }

  // Repeats of a key lie far apart in a spike's backlog: coalescing subscribers also get their
  // whole unheld backlog swept (a thread of its own; idle when none coalesces).
  std::optional<coalesce_sweeper> sweeper;
  sweeper.emplace(coalesce_sweeper_config{.db_path = config.storage.db_path,
                                          .shape = config.storage.shape,
                                          .subscribers = config.subscribers},
                  counters, storage.judgement());
  std::optional<metrics_server> server;
  std::optional<queue_sampler> sampler;
  // On a terminal: one status line redrawn every second. Otherwise: a log line now and then.
  const bool status_line =
      config.status == drain_config::status_line::on ||
      (config.status == drain_config::status_line::automatic && ::isatty(STDERR_FILENO));
  const queue_sampler_config sampling{.db_path = config.storage.db_path,
                                      .shape = config.storage.shape,
                                      .subscribers = config.subscribers};
  // The partner view's queued rows and ETA: whoever shows them needs the queue sampled.
  if (config.metrics_listen || status_line || config.progress) sampler.emplace(sampling, metrics);
  metrics.retry_max_age_seconds = static_cast<double>(config.retry.max_age.count());
  if (config.metrics_listen) {
    server.emplace(
        control, *config.metrics_listen,
        metrics_server::handlers{
            .metrics = [&] { return metrics_text(metrics, config.metrics_top_subscribers); },
            .unhealthy_reason =
                [&] {
                  return metrics.unhealthy_reason(std::chrono::seconds(10),
                                                  std::chrono::seconds(2));
                },
            .partners_json =
                [&] {
                  return partners_json(metrics.partners(), metrics.origins(), proto::unix_now());
                }});
    log_info("metrics on http://" +
             config.metrics_listen->substr(0, config.metrics_listen->rfind(':')) + ":" +
             std::to_string(server->port()) + "/metrics");
  }

  set_status_line_active(status_line);
  const auto tick = status_line ? std::chrono::milliseconds(1000) : config.progress_interval;
  std::int64_t delivered_before = 0;
  double smoothed_rate = 0;
  auto last_tick = std::chrono::steady_clock::now();
  std::function<void()> schedule_progress = [&] {
    if (!status_line && !config.progress) return;
    progress_timer.expires_after(tick);
    progress_timer.async_wait([&](boost::system::error_code ec) {
      if (ec) return;
      const auto now = std::chrono::steady_clock::now();
      const double seconds = std::chrono::duration<double>(now - last_tick).count();
      const auto delivered = counters.delivered.load();
      const double rate =
          seconds > 0 ? static_cast<double>(delivered - delivered_before) / seconds : 0;
      // Smoothed over a few ticks so the ETA does not jump with every burst.
      smoothed_rate = smoothed_rate == 0 ? rate : 0.7 * smoothed_rate + 0.3 * rate;
      delivered_before = delivered;
      last_tick = now;
      if (status_line) {
        write_status_line(status_text(metrics, smoothed_rate));
      } else {
        log_info(progress_line(metrics, rate));
      }
      schedule_progress();
    });
  };
  schedule_progress();

  storage.start();
  for (auto& s : shards) s->start();
  log_info("draining " + storage::printable_location(config.storage.db_path) + " with " +
           std::to_string(config.threads) + " shards");

  control.run();
  sweeper.reset();
  if (status_line) end_status_line();
  if (server) server->stop();

  for (auto& s : shards) s->join();
  storage.join();

  summary.delivered = counters.delivered.load();
  summary.retried = counters.retried.load();
  summary.dead = counters.dead.load();
  summary.released = counters.released.load();
  summary.coalesced = counters.coalesced.load();
  summary.lost_leases = counters.lost_leases.load();
  summary.attempts = counters.attempts.load();
  summary.remaining = storage.remaining();
  summary.held = metrics.held_subscribers();
  summary.quarantined = storage.quarantined();
  std::sort(summary.held.begin(), summary.held.end(),
            [](const auto& a, const auto& b) { return a.id < b.id; });
  summary.left = partners_left(metrics, sampling);
  summary.storage_errors = counters.storage_errors.load();
  summary.tls_full_handshakes = metrics.tls_handshakes_full.load();
  summary.tls_resumed_handshakes = metrics.tls_handshakes_resumed.load();
  summary.unwritten = storage.unwritten();
  if (!storage.rescue_report().empty()) summary.failure += "; " + storage.rescue_report();
  summary.elapsed = std::chrono::steady_clock::now() - started;
  // What the drain cost the queue file; bench/storage_io.py reads this line. A database server
  // keeps no such count for us.
  if (!storage::is_postgres_location(config.storage.db_path)) {
    log_info("storage: " + std::to_string(counters.wal_commits.load()) + " commits wrote " +
             std::to_string(counters.wal_frames.load()) + " WAL frames for " +
             std::to_string(summary.attempts) + " attempts");
  }
  return summary;
}

}  // namespace surge::engine
