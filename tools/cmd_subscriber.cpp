// surge subscriber add|list|set|enable|disable: manage endpoints without writing SQL.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>

#include <boost/json/value.hpp>

#include "engine/net/client_identity.hpp"
#include "proto/batch.hpp"
#include "proto/coalesce.hpp"
#include "proto/event_match.hpp"
#include "proto/extra_headers.hpp"
#include "proto/signing.hpp"
#include "proto/target_policy.hpp"
#include "storage/connection.hpp"
#include "storage/database.hpp"
#include "storage/ordered_keys.hpp"
#include "storage/schema.hpp"
#include "storage/subscribers.hpp"
#include "tools/commands.hpp"
#include "tools/json_text.hpp"
#include "tools/number_check.hpp"

namespace surge::tools {

namespace {

struct subscriber_options {
  std::string db_path;
  std::string shape;
  std::int64_t id = 0;
  std::optional<std::string> url, secret, events, signing, region;
  std::optional<double> rate, rate_per_minute;
  std::optional<std::int64_t> burst, max_in_flight;
  std::optional<std::int64_t> batch, batch_bytes;
  std::optional<double> batch_linger, coalesce_window;
  std::optional<std::string> coalesce, coalesce_events;
  // Credentials (Surge's own table, either shape).
  std::vector<std::string> headers, remove_headers;
  bool clear_headers = false;
  std::optional<std::string> client_cert, client_key;
  bool no_client_cert = false;
  std::optional<std::string> proxy;
  bool no_proxy = false;
  // Ordered delivery per key (Surge's own table, either shape).
  std::optional<std::string> ordered, dead_key;
  bool unordered = false;
  bool json = false;

  bool changes_credentials() const {
    return !headers.empty() || !remove_headers.empty() || clear_headers || client_cert ||
           no_client_cert || proxy || no_proxy;
  }
};

void add_setting_options(CLI::App* cmd, subscriber_options& o) {
  cmd->add_option("--url", o.url, "Endpoint URL (http or https); validated, not resolved");
  cmd->add_option("--secret", o.secret,
                  "Signing secret (default: a new random one; whsec_ form for standard)");
  cmd->add_option("--events", o.events,
                  "Event filter: '*', exact types, 'video.*', comma-separated");
  auto* rate = cmd->add_option("--rate", o.rate, "Requests per second (0 pauses)")
                   ->check(finite_in(0.0, 1e9));
  auto* per_minute = cmd->add_option("--rate-per-minute", o.rate_per_minute,
                                     "Requests per minute (sets rate to n/60)")
                         ->check(finite_in(0.0, 6e10));
  rate->excludes(per_minute);
  cmd->add_option("--burst", o.burst, "Bucket capacity (requests sent at once after idling)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1'000'000'000}));
  cmd->add_option("--signing", o.signing, "Signature scheme: vvv or standard")
      ->check(CLI::IsMember({"vvv", "standard"}));
  cmd->add_option("--max-in-flight", o.max_in_flight,
                  "Concurrent requests to this endpoint (0: the drain's default)")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{100000}));
  cmd->add_option("--batch", o.batch,
                  "Rows per request, sent as a JSON array (1: one row per request, the default)")
      ->check(CLI::Range(std::int64_t{1}, proto::max_batch_rows));
  cmd->add_option("--batch-bytes", o.batch_bytes, "Largest batch body in bytes (default 1048576)")
      ->check(CLI::Range(std::int64_t{2}, proto::max_batch_bytes));
  cmd->add_option("--batch-linger", o.batch_linger,
                  "Seconds a partial batch waits for more rows (default 0.5)")
      ->transform(duration_in(0.0, proto::max_batch_linger_seconds));
  cmd->add_option("--coalesce", o.coalesce,
                  "JSON pointer to the key whose repeats are merged, e.g. /data/video_id "
                  "('' turns coalescing off)");
  cmd->add_option("--coalesce-window", o.coalesce_window,
                  "Seconds within which repeats of a key are merged (default 10)")
      ->transform(duration_in(0.001, proto::max_coalesce_window_seconds));
  cmd->add_option("--coalesce-events", o.coalesce_events,
                  "Event types coalescing applies to, same syntax as --events (default '*')");
  cmd->add_option("--header", o.headers,
                  "An extra request header 'Name: value' the partner requires (an API key, "
                  "'Authorization: Bearer ...'); repeatable; replaces a header of that name. "
                  "Never one Surge sets itself (Host, Content-*, X-VVV-*, webhook-*, ...)");
  auto* cert = cmd->add_option("--client-cert", o.client_cert,
                               "PEM file of the TLS client certificate (chain) presented to the "
                               "partner (mutual TLS); the path is stored, not the contents");
  auto* key = cmd->add_option("--client-key", o.client_key,
                              "PEM file of the client certificate's private key");
  cert->needs(key);
  key->needs(cert);
  cmd->add_option("--proxy", o.proxy,
                  "The egress proxy this partner's connections leave through, http://HOST:PORT "
                  "(instead of the drain's --proxy); each is a CONNECT tunnel to an address "
                  "Surge checked");
  cmd->add_option("--ordered", o.ordered,
                  "Deliver in enqueue order per key, one row of a key in flight: the JSON pointer "
                  "to the key in the payload (e.g. /video_id); '' orders the whole subscriber");
  cmd->add_option("--dead-key", o.dead_key,
                  "When a row of an ordered key dies: skip (the key moves on, the default) or "
                  "stop (its later rows wait for `dead replay` or `subscriber resume-key`)")
      ->check(CLI::IsMember({"skip", "stop"}));
  cmd->add_option("--region", o.region,
                  "seed001 queues only: the ISO country the partner's deliveries are routed by "
                  "(required there when adding)");
}

// Extra headers and client certificate files. Checked here as the drain will check them, so a
// value the drain would hold the subscriber for is refused with exit 2 instead. Paths are stored
// absolute: the drain runs from another directory.
void apply_credentials(const subscriber_options& o, storage::subscriber_row& row) {
  auto& fields = row.extra_headers;
  if (o.clear_headers) fields.clear();
  for (const auto& name : o.remove_headers) {
    std::erase_if(fields, [&](const auto& f) { return proto::same_header_name(f.name, name); });
  }
  for (const auto& line : o.headers) {
    std::string error;
    auto field = proto::parse_header_line(line, &error);
    // The problem names the header, never the line: its value is a credential, and usage
    // errors end up in terminals and tickets.
    if (!error.empty()) throw usage_error("bad --header: " + error);
    std::erase_if(fields,
                  [&](const auto& f) { return proto::same_header_name(f.name, field.name); });
    fields.push_back(std::move(field));
  }
  if (o.no_client_cert) {
    row.client_cert_file.clear();
    row.client_key_file.clear();
  }
  if (o.client_cert && o.client_key) {
    std::error_code ec;
    const auto cert = std::filesystem::absolute(*o.client_cert, ec).lexically_normal().string();
    const auto key = std::filesystem::absolute(*o.client_key, ec).lexically_normal().string();
    try {
      engine::load_client_identity(engine::http_client_config{}, cert, key);
    } catch (const std::exception& error) {
      throw usage_error(std::string("bad --client-cert/--client-key: ") + error.what());
    }
    row.client_cert_file = cert;
    row.client_key_file = key;
  }
  if (o.no_proxy) row.proxy.clear();
  if (o.proxy) {
    if (auto parsed = proto::parse_proxy_url(*o.proxy); !parsed.value) {
      throw usage_error("--proxy: '" + proto::redact_url(*o.proxy) + "' " + parsed.error);
    }
    row.proxy = *o.proxy;
  }
}

// What the partner gets besides the signature, for listings: header names only, never their
// values (they are credentials), and the certificate's files.
std::string credentials_text(const storage::subscriber_row& row) {
  std::string parts;
  if (!row.extra_headers.empty()) {
    parts += "headers";
    for (std::size_t i = 0; i < row.extra_headers.size(); ++i) {
      parts += (i == 0 ? " " : ", ") + row.extra_headers[i].name;
    }
  }
  if (!row.client_cert_file.empty()) {
    parts += (parts.empty() ? "" : "; ") + std::string("client cert ") + row.client_cert_file +
             " (key " + row.client_key_file + ")";
  }
  if (!row.proxy.empty()) {
    parts += (parts.empty() ? "" : "; ") + std::string("proxy ") + proto::redact_url(row.proxy);
  }
  return parts.empty() ? "" : " {" + parts + "}";
}

// A seed001 queue stores only endpoint, secret, events, rate_per_min, burst, region and active:
// a setting it has no column for is refused rather than silently dropped, and its signatures
// are the producer's, made at enqueue. seed000 has no region.
void check_for_shape(const subscriber_options& o, storage::queue_shape shape, bool adding) {
  if (shape == storage::queue_shape::seed000) {
    if (o.region) throw usage_error("--region exists only on a seed001 queue");
    return;
  }
  const std::pair<bool, const char*> unsupported[] = {
      {o.signing.has_value(), "--signing"},
      {o.max_in_flight.has_value(), "--max-in-flight"},
      {o.batch.has_value(), "--batch"},
      {o.batch_bytes.has_value(), "--batch-bytes"},
      {o.batch_linger.has_value(), "--batch-linger"},
      {o.coalesce.has_value(), "--coalesce"},
      {o.coalesce_window.has_value(), "--coalesce-window"},
      {o.coalesce_events.has_value(), "--coalesce-events"}};
  for (const auto& [given, flag] : unsupported) {
    if (given) {
      throw usage_error(std::string(flag) +
                        " has no column on a seed001 queue "
                        "(webhook_subscribers)");
    }
  }
  if (adding && (!o.region || o.region->empty())) {
    throw usage_error(
        "a seed001 queue routes each subscriber by region: give --region (an ISO "
        "country code such as DE)");
  }
  const double per_minute = o.rate ? *o.rate * 60 : o.rate_per_minute.value_or(0);
  if (per_minute != std::round(per_minute)) {
    throw usage_error(
        "a seed001 queue stores whole requests per minute (rate_per_min): give "
        "--rate-per-minute N");
  }
}

void apply_settings(const subscriber_options& o, storage::subscriber_row& row) {
  if (o.url) {
    const auto parsed = proto::parse_target_url(*o.url);
    if (!parsed.value) {
      throw usage_error("--url: '" + proto::redact_url(*o.url) + "' " + parsed.error);
    }
    row.url = *o.url;
  }
  if (o.events) {
    if (auto problem = proto::validate_event_patterns(*o.events); !problem.empty()) {
      throw usage_error("bad --events: " + problem);
    }
    row.event_types = *o.events;
  }
  if (o.signing) row.signing = *o.signing;
  if (o.region) row.region = *o.region;
  if (o.secret) row.secret = *o.secret;
  if (o.rate) row.rate_per_sec = *o.rate;
  if (o.rate_per_minute) row.rate_per_sec = *o.rate_per_minute / 60.0;
  if (o.burst) row.burst = *o.burst;
  if (o.max_in_flight) row.max_in_flight = *o.max_in_flight;
  if (o.batch) row.batch_max = *o.batch;
  if (o.batch_bytes) row.batch_bytes = *o.batch_bytes;
  if (o.batch_linger) row.batch_linger = *o.batch_linger;
  if (o.coalesce) {
    if (!o.coalesce->empty()) {
      if (auto problem = proto::coalesce_pointer_problem(*o.coalesce); !problem.empty()) {
        throw usage_error("bad --coalesce: '" + *o.coalesce + "' " + problem);
      }
    }
    row.coalesce_key = *o.coalesce;
  }
  if (o.coalesce_window) row.coalesce_window = *o.coalesce_window;
  if (o.coalesce_events) {
    if (auto problem = proto::validate_event_patterns(*o.coalesce_events); !problem.empty()) {
      throw usage_error("bad --coalesce-events: " + problem);
    }
    row.coalesce_events = *o.coalesce_events;
  }
  // Another program may have stored text; writing the row back would fail on NOT NULL.
  if (row.rate_text && !o.rate && !o.rate_per_minute) {
    throw usage_error("rate_per_sec is stored as " + *row.rate_text +
                      ", not a number: give --rate or --rate-per-minute");
  }
  if (row.burst_text && !o.burst) {
    throw usage_error("burst is stored as " + *row.burst_text + ", not a number: give --burst");
  }
  const auto scheme = proto::parse_signing_scheme(row.signing);
  if (!scheme) throw usage_error("unknown signing '" + row.signing + "'");
  if (auto problem = proto::problem_with_new_secret(*scheme, row.secret); !problem.empty()) {
    throw usage_error("the secret does not suit signing '" + row.signing + "': " + problem);
  }
}

// URLs are redacted (proto::redact_url): partners put tokens in them, and listings end up in
// tickets and terminals.
boost::json::object to_json(const storage::subscriber_row& row) {
  boost::json::object out{{"id", row.id},
                          {"url", proto::redact_url(row.url)},
                          {"event_types", row.event_types},
                          {"rate_per_sec", row.rate_per_sec},
                          {"burst", row.burst},
                          {"active", row.active},
                          {"signing", row.signing},
                          {"max_in_flight", row.max_in_flight},
                          {"tokens", row.tokens}};
  out["batch_max"] = row.batch_max;
  out["batch_bytes"] = row.batch_bytes;
  out["batch_linger"] = row.batch_linger;
  out["coalesce_key"] = row.coalesce_key;
  out["coalesce_window"] = row.coalesce_window;
  out["coalesce_events"] = row.coalesce_events;
  boost::json::array header_names;
  for (const auto& field : row.extra_headers)
    header_names.push_back(boost::json::string(field.name));
  out["headers"] = std::move(header_names);  // names only: the values are credentials
  out["client_cert"] = row.client_cert_file;
  out["client_key"] = row.client_key_file;
  out["proxy"] = row.proxy;
  out["ordered_key"] =
      row.order ? boost::json::value(row.order->pointer) : boost::json::value(nullptr);
  if (row.order) out["dead_key"] = proto::dead_key_name(row.order->when_dead);
  // A rate stored as something other than a number reads NaN, which JSON cannot carry.
  if (!std::isfinite(row.rate_per_sec)) out["rate_per_sec"] = nullptr;
  return out;
}

// " [batch 100 <= 1048576 B, linger 0.5 s; coalesce /data/id within 10 s for video.*; ordered by
// '/video_id', dead key: skip]", or "" when all are off.
std::string relief_text(const storage::subscriber_row& row) {
  std::string parts;
  char text[160];
  if (row.batch_max > 1) {
    std::snprintf(text, sizeof text, "batch %lld <= %lld B, linger %g s",
                  static_cast<long long>(row.batch_max), static_cast<long long>(row.batch_bytes),
                  row.batch_linger);
    parts += text;
  }
  if (!row.coalesce_key.empty()) {
    std::snprintf(text, sizeof text, "coalesce %s within %g s for %s", row.coalesce_key.c_str(),
                  row.coalesce_window, row.coalesce_events.c_str());
    parts += (parts.empty() ? "" : "; ") + std::string(text);
  }
  if (row.order) {
    parts += (parts.empty() ? "ordered by '" : "; ordered by '") + row.order->pointer +
             "', dead key: " + std::string(proto::dead_key_name(row.order->when_dead));
  }
  return parts.empty() ? "" : " [" + parts + "]";
}

// The order rule the options give `row` (which holds the stored one), or nullopt when they
// change nothing about ordering; `turn_off` is set for --unordered.
std::optional<proto::order_rule> order_change(const subscriber_options& o,
                                              const storage::subscriber_row& row, bool& turn_off) {
  turn_off = o.unordered;
  if (o.unordered) return std::nullopt;
  if (!o.ordered && !o.dead_key) return std::nullopt;
  if (!o.ordered && !row.order) {
    throw usage_error("--dead-key applies to an ordered subscriber: give --ordered as well");
  }
  proto::order_rule rule = o.ordered ? proto::order_rule{.pointer = *o.ordered} : *row.order;
  if (o.ordered && row.order) rule.when_dead = row.order->when_dead;
  if (auto problem = proto::order_pointer_problem(rule.pointer); !problem.empty()) {
    throw usage_error("bad --ordered: '" + rule.pointer + "' " + problem);
  }
  if (o.dead_key) proto::parse_dead_key(*o.dead_key, rule.when_dead);
  return rule;
}

storage::connection open_migrated(const subscriber_options& o) {
  storage::connection db({.location = o.db_path, .shape = named_shape(o.shape)});
  storage::migrate(db);
  return db;
}

storage::subscriber_row must_load(storage::connection& db, std::int64_t id) {
  auto row = storage::load_subscriber(db, id);
  if (!row) throw std::runtime_error("no subscriber with id " + std::to_string(id));
  return *row;
}

}  // namespace

void add_subscriber_command(CLI::App& app, command_action& action) {
  auto* group = app.add_subcommand(
      "subscriber",
      "Add, list, change, enable or disable subscribers, or resume their stopped keys.");
  group->require_subcommand(1, 1);

  auto add_opts = std::make_shared<subscriber_options>();
  auto* add = group->add_subcommand("add", "Add a subscriber and print its id.");
  add->add_option("--db", add_opts->db_path, "Queue: a SQLite file or a postgresql:// URI")
      ->required();
  add_queue_shape_option(add, add_opts->shape);
  add_setting_options(add, *add_opts);
  add->get_option("--url")->required();
  add->add_flag("--json", add_opts->json, "Print the new subscriber as JSON");
  add->callback([&action, add_opts] {
    action = [add_opts] {
      auto db = open_migrated(*add_opts);
      const auto shape = db.shape();
      check_for_shape(*add_opts, shape, true);
      storage::subscriber_row row;
      row.signing =
          shape == storage::queue_shape::seed001 ? "stored" : add_opts->signing.value_or("vvv");
      if (!add_opts->secret) {
        row.secret = proto::generate_secret(*proto::parse_signing_scheme(row.signing));
      }
      apply_settings(*add_opts, row);
      apply_credentials(*add_opts, row);
      bool turn_off = false;
      const auto order = order_change(*add_opts, row, turn_off);
      row.tokens = static_cast<double>(row.burst);
      row.order = order;
      row.id = storage::add_subscriber(
          db, row,
          add_opts->changes_credentials() ? storage::credentials_write::replace
                                          : storage::credentials_write::keep,
          order ? storage::order_write::replace : storage::order_write::keep);
      if (add_opts->json) {
        auto out = to_json(row);
        out["secret"] = row.secret;
        std::cout << json_text(out) << "\n";
      } else {
        std::cout << row.id << "\n";
        // The id stays alone on standard output, for `id=$(surge subscriber add …)`; a secret
        // Surge made up is the partner's to know, so the operator is told where it is.
        if (!add_opts->secret) {
          std::cerr << "subscriber " << row.id << ": generated signing secret " << row.secret
                    << "\n  (give it to the partner; `surge subscriber secret --db … " << row.id
                    << "` prints it again)\n";
        }
      }
      return exit_ok;
    };
  });

  auto list_opts = std::make_shared<subscriber_options>();
  auto* list = group->add_subcommand("list", "List subscribers.");
  list->add_option("--db", list_opts->db_path, "Queue: a SQLite file or a postgresql:// URI")
      ->required()
      ->check(existing_queue());
  add_queue_shape_option(list, list_opts->shape);
  list->add_flag("--json", list_opts->json, "Print JSON");
  list->callback([&action, list_opts] {
    action = [list_opts] {
      storage::connection db({.location = list_opts->db_path,
                              .create_if_missing = false,
                              .shape = named_shape(list_opts->shape)});
      const auto rows = storage::load_subscribers(db);
      if (list_opts->json) {
        boost::json::array out;
        for (const auto& row : rows) out.push_back(to_json(row));
        std::cout << json_text(out) << "\n";
        return exit_ok;
      }
      std::printf("%6s %-8s %10s %6s %-9s %5s  %s\n", "id", "active", "rate/s", "burst", "signing",
                  "max", "url (events) [batch, coalescing] {credentials}");
      for (const auto& r : rows) {
        std::printf("%6lld %-8s %10.3f %6lld %-9s %5lld  %s (%s)%s%s\n",
                    static_cast<long long>(r.id), r.active ? "yes" : "no", r.rate_per_sec,
                    static_cast<long long>(r.burst), r.signing.c_str(),
                    static_cast<long long>(r.max_in_flight), proto::redact_url(r.url).c_str(),
                    r.event_types.c_str(), relief_text(r).c_str(), credentials_text(r).c_str());
      }
      return exit_ok;
    };
  });

  auto set_opts = std::make_shared<subscriber_options>();
  auto* set = group->add_subcommand("set", "Change a subscriber's settings.");
  set->add_option("--db", set_opts->db_path, "Queue: a SQLite file or a postgresql:// URI")
      ->required()
      ->check(existing_queue());
  add_queue_shape_option(set, set_opts->shape);
  set->add_option("id", set_opts->id, "Subscriber id")->required();
  add_setting_options(set, *set_opts);
  set->add_option("--remove-header", set_opts->remove_headers,
                  "Stop sending the extra header of this name; repeatable");
  set->add_flag("--clear-headers", set_opts->clear_headers,
                "Stop sending every extra header (before any --header given)");
  auto* no_cert = set->add_flag("--no-client-cert", set_opts->no_client_cert,
                                "Stop presenting a client certificate");
  no_cert->excludes(set->get_option("--client-cert"));
  set->add_flag("--no-proxy", set_opts->no_proxy,
                "Leave through the drain's --proxy (or directly) again")
      ->excludes(set->get_option("--proxy"));
  set->add_flag("--unordered", set_opts->unordered,
                "Deliver without order again (its stopped keys go on)")
      ->excludes(set->get_option("--ordered"))
      ->excludes(set->get_option("--dead-key"));
  set->callback([&action, set_opts] {
    action = [set_opts] {
      auto db = open_migrated(*set_opts);
      check_for_shape(*set_opts, db.shape(), false);
      auto row = must_load(db, set_opts->id);
      apply_settings(*set_opts, row);
      apply_credentials(*set_opts, row);
      bool turn_off = false;
      const auto order = order_change(*set_opts, row, turn_off);
      if (order || turn_off) row.order = order;
      storage::update_subscriber(
          db, row,
          set_opts->changes_credentials() ? storage::credentials_write::replace
                                          : storage::credentials_write::keep,
          order || turn_off ? storage::order_write::replace : storage::order_write::keep);
      std::cout << "updated subscriber " << row.id << "\n";
      return exit_ok;
    };
  });

  auto resume_opts = std::make_shared<subscriber_options>();
  auto resume_key = std::make_shared<std::optional<std::string>>();
  auto resume_all = std::make_shared<bool>(false);
  auto* resume = group->add_subcommand(
      "resume-key",
      "Let an ordered subscriber's stopped key go on past its dead row (which stays dead).");
  resume->add_option("--db", resume_opts->db_path, "Queue: a SQLite file or a postgresql:// URI")
      ->required()
      ->check(existing_queue());
  add_queue_shape_option(resume, resume_opts->shape);
  resume->add_option("id", resume_opts->id, "Subscriber id")->required();
  auto* key_option =
      resume->add_option("--key", *resume_key,
                         "The stopped key as `surge stats` shows it (JSON text, e.g. 42 or \"a\")");
  auto* all_option = resume->add_flag("--all", *resume_all, "Every stopped key of the subscriber");
  key_option->excludes(all_option);
  resume->callback([&action, resume_opts, resume_key, resume_all] {
    if (!*resume_key && !*resume_all) throw CLI::ValidationError("give --key KEY or --all");
    action = [resume_opts, resume_key, resume_all] {
      auto db = open_migrated(*resume_opts);
      must_load(db, resume_opts->id);
      const int resumed = storage::resume_stopped_keys(db, resume_opts->id,
                                                       *resume_all ? std::nullopt : *resume_key);
      if (resumed == 0 && *resume_key) {
        throw std::runtime_error("subscriber " + std::to_string(resume_opts->id) +
                                 " has no stopped key " + **resume_key +
                                 " (surge stats lists them)");
      }
      std::cout << "resumed " << resumed << (resumed == 1 ? " key" : " keys") << " of subscriber "
                << resume_opts->id << "\n";
      return exit_ok;
    };
  });

  auto secret_opts = std::make_shared<subscriber_options>();
  auto* secret = group->add_subcommand(
      "secret", "Print a subscriber's signing secret (for the partner, who verifies with it).");
  secret->add_option("--db", secret_opts->db_path, "Queue: a SQLite file or a postgresql:// URI")
      ->required()
      ->check(existing_queue());
  add_queue_shape_option(secret, secret_opts->shape);
  secret->add_option("id", secret_opts->id, "Subscriber id")->required();
  secret->callback([&action, secret_opts] {
    action = [secret_opts] {
      storage::connection db({.location = secret_opts->db_path,
                              .create_if_missing = false,
                              .shape = named_shape(secret_opts->shape)});
      std::cout << must_load(db, secret_opts->id).secret << "\n";
      return exit_ok;
    };
  });

  for (const bool enable : {true, false}) {
    auto opts = std::make_shared<subscriber_options>();
    auto* cmd =
        group->add_subcommand(enable ? "enable" : "disable",
                              enable ? "Mark a subscriber active." : "Mark a subscriber inactive.");
    cmd->add_option("--db", opts->db_path, "Queue: a SQLite file or a postgresql:// URI")
        ->required()
        ->check(existing_queue());
    add_queue_shape_option(cmd, opts->shape);
    cmd->add_option("id", opts->id, "Subscriber id")->required();
    cmd->callback([&action, opts, enable] {
      action = [opts, enable] {
        auto db = open_migrated(*opts);
        if (!storage::set_subscriber_active(db, opts->id, enable)) {
          throw std::runtime_error("no subscriber with id " + std::to_string(opts->id));
        }
        std::cout << (enable ? "enabled" : "disabled") << " subscriber " << opts->id << "\n";
        return exit_ok;
      };
    });
  }
}

}  // namespace surge::tools
