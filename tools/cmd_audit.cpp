// surge audit: did every subscriber get at most what its rate limit allows?
// Read from surge_attempt, i.e. when Surge started each request.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <optional>

#include <boost/json/value.hpp>

#include "storage/connection.hpp"
#include "storage/audit.hpp"
#include "storage/database.hpp"
#include "tools/audit_chart.hpp"
#include "tools/commands.hpp"
#include "tools/json_text.hpp"
#include "tools/process.hpp"

namespace surge::tools {

namespace {

// More panels than this make an unreadable picture; the busiest are the interesting ones.
constexpr std::size_t chart_max_subscribers = 10;

struct audit_options {
  std::string db_path;
  std::string shape;
  std::optional<std::string> subscribers;
  std::optional<std::string> chart;
  bool json = false;
};

boost::json::value optional_number(const std::optional<double>& value) {
  if (!value) return nullptr;
  return *value;
}

boost::json::object to_json(const storage::subscriber_audit& a) {
  boost::json::object out{
      {"subscriber_id", a.subscriber_id},
      {"rate_per_sec", nullptr},
      {"burst", nullptr},
      {"active", nullptr},
      {"attempts", a.attempts},
      {"rows", a.rows},
      {"successes", a.successes},
      {"first_started_at", a.first_started_at},
      {"last_started_at", a.last_started_at},
      {"max_1s", a.max_per_1s},
      {"allowed_1s", nullptr},
      {"max_60s", a.max_per_60s},
      {"allowed_60s", nullptr},
      {"worst_window", nullptr},
      {"violation", a.violation},
      {"achieved_rate", optional_number(a.achieved_rate)},
      {"latency_seconds",
       boost::json::object{{"p50", a.latency_p50}, {"p90", a.latency_p90}, {"p99", a.latency_p99}}},
  };
  if (a.limit) {
    out["rate_per_sec"] = a.limit->rate_per_sec;
    out["burst"] = a.limit->burst;
    out["active"] = a.limit->active;
    out["allowed_1s"] = a.allowed_per_1s;
    out["allowed_60s"] = a.allowed_per_60s;
    out["worst_window"] = boost::json::object{{"seconds", a.worst_window_seconds},
                                              {"count", a.worst_window_count},
                                              {"excess", a.worst_window_excess}};
  }
  return out;
}

void print_table(const std::vector<storage::audit_entry>& entries) {
  std::printf("%10s %9s %6s %9s %9s %9s %14s %16s %22s %10s %8s %8s %8s  %s\n", "subscriber",
              "rate/s", "burst", "attempts", "rows", "2xx", "max/1s (allow)", "max/60s (allow)",
              "worst window (excess)", "achieved/s", "p50_ms", "p90_ms", "p99_ms", "verdict");
  for (const auto& entry : entries) {
    const auto& a = entry.summary;
    char rate[16] = "-", burst[16] = "-", in_1s[32], in_60s[32], achieved[16] = "-";
    char worst[48] = "-";
    if (a.limit) {
      std::snprintf(rate, sizeof rate, "%.3f", a.limit->rate_per_sec);
      std::snprintf(burst, sizeof burst, "%lld", static_cast<long long>(a.limit->burst));
      std::snprintf(in_1s, sizeof in_1s, "%lld (%.0f)", static_cast<long long>(a.max_per_1s),
                    a.allowed_per_1s);
      std::snprintf(in_60s, sizeof in_60s, "%lld (%.0f)", static_cast<long long>(a.max_per_60s),
                    a.allowed_per_60s);
      std::snprintf(worst, sizeof worst, "%lld in %.2fs (%+.1f)",
                    static_cast<long long>(a.worst_window_count), a.worst_window_seconds,
                    a.worst_window_excess);
    } else {
      std::snprintf(in_1s, sizeof in_1s, "%lld (-)", static_cast<long long>(a.max_per_1s));
      std::snprintf(in_60s, sizeof in_60s, "%lld (-)", static_cast<long long>(a.max_per_60s));
    }
    if (a.achieved_rate) std::snprintf(achieved, sizeof achieved, "%.3f", *a.achieved_rate);
    const char* verdict = a.violation ? "VIOLATION" : a.limit ? "ok" : "ok (subscriber gone)";
    std::printf("%10lld %9s %6s %9lld %9lld %9lld %14s %16s %22s %10s %8.1f %8.1f %8.1f  %s\n",
                static_cast<long long>(a.subscriber_id), rate, burst,
                static_cast<long long>(a.attempts), static_cast<long long>(a.rows),
                static_cast<long long>(a.successes), in_1s, in_60s, worst, achieved,
                a.latency_p50 * 1000, a.latency_p90 * 1000, a.latency_p99 * 1000, verdict);
  }
  if (entries.empty()) std::printf("(no attempts recorded)\n");
}

// The busiest subscribers by attempts, in id order for a stable layout.
std::vector<chart_series> chart_data(const std::vector<storage::audit_entry>& entries) {
  std::vector<const storage::audit_entry*> chosen;
  for (const auto& entry : entries) chosen.push_back(&entry);
  if (chosen.size() > chart_max_subscribers) {
    std::stable_sort(chosen.begin(), chosen.end(), [](const auto* a, const auto* b) {
      return a->summary.attempts > b->summary.attempts;
    });
    chosen.resize(chart_max_subscribers);
    std::sort(chosen.begin(), chosen.end(), [](const auto* a, const auto* b) {
      return a->summary.subscriber_id < b->summary.subscriber_id;
    });
  }
  std::vector<chart_series> series;
  for (const auto* entry : chosen) {
    chart_series& s = series.emplace_back();
    s.subscriber_id = entry->summary.subscriber_id;
    s.has_limit = entry->summary.limit.has_value();
    if (s.has_limit) {
      s.rate_per_sec = entry->summary.limit->rate_per_sec;
      s.burst = entry->summary.limit->burst;
    }
    s.answers = entry->answers;
  }
  return series;
}

int run_audit(const audit_options& o) {
  proto::id_set which;
  if (o.subscribers) {
    std::string error;
    auto ids = proto::id_set::parse(*o.subscribers, &error);
    if (!ids) throw usage_error("bad --subscriber '" + *o.subscribers + "': " + error);
    which = std::move(*ids);
  }
  // Checked first, so a missing gnuplot does not cost a scan of the attempt table.
  std::optional<std::string> gnuplot;
  if (o.chart) {
    gnuplot = find_program("gnuplot");
    if (!gnuplot) {
      throw std::runtime_error(
          "--chart needs gnuplot, which is not on PATH (Debian: apt-get install gnuplot-nox)");
    }
  }

  storage::connection db(
      {.location = o.db_path, .create_if_missing = false, .shape = named_shape(o.shape)});
  const auto entries = storage::read_audit(db, which, o.chart.has_value());
  const bool violation = std::any_of(entries.begin(), entries.end(),
                                     [](const auto& e) { return e.summary.violation; });

  if (o.json) {
    boost::json::array out;
    for (const auto& entry : entries) out.push_back(to_json(entry.summary));
    std::cout << json_text(out) << "\n";
  } else {
    print_table(entries);
  }
  if (o.chart) {
    if (entries.empty()) throw std::runtime_error("no attempts recorded: nothing to chart");
    const auto series = chart_data(entries);
    draw_delivery_chart(*gnuplot, *o.chart, series);
    // On stderr with --json, so stdout stays one JSON document.
    (o.json ? std::cerr : std::cout)
        << "chart: " << *o.chart << " (" << series.size() << " of " << entries.size()
        << " subscribers" << (series.size() < entries.size() ? ", the busiest" : "") << ")\n";
  }
  return violation ? exit_violation : exit_ok;
}

}  // namespace

void add_audit_command(CLI::App& app, command_action& action) {
  auto* cmd = app.add_subcommand(
      "audit",
      "Check every subscriber's recorded attempts against its current rate limit: the most "
      "requests started in any 1 s and 60 s window against burst + rate x T + 1, the rate "
      "achieved after the first burst, latency percentiles.");
  auto opts = std::make_shared<audit_options>();
  cmd->add_option("--db", opts->db_path, "Queue: a SQLite file or a postgresql:// URI")
      ->required()
      ->check(existing_queue());
  add_queue_shape_option(cmd, opts->shape);
  cmd->add_option("--subscriber,--subscribers", opts->subscribers,
                  "Only these subscribers: an id or a list such as 1,4,10-20");
  cmd->add_flag("--json", opts->json, "Print a JSON array instead of a table");
  cmd->add_option("--chart", opts->chart,
                  "Also draw 2xx per second per subscriber (the 10 busiest) against its limit "
                  "into this PNG file (needs gnuplot)");
  cmd->footer(
      "Exit codes: 0 no violation, 4 at least one subscriber exceeded its limit, 1 failure "
      "(database error, gnuplot missing or failing), 2 bad command line.\n");
  cmd->callback([&action, opts] { action = [opts] { return run_audit(*opts); }; });
}

}  // namespace surge::tools
