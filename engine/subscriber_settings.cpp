#include "engine/subscriber_settings.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "proto/event_match.hpp"

namespace surge::engine {

std::string limits_problem(const storage::subscriber_row& row) {
  if (row.rate_text) return "rate_per_sec " + *row.rate_text + " is not a number";
  if (!std::isfinite(row.rate_per_sec) || row.rate_per_sec < 0) {
    char text[64];
    std::snprintf(text, sizeof text, "%g", row.rate_per_sec);
    return "rate_per_sec " + std::string(text) + " is not a finite number >= 0";
  }
  if (row.burst_text) return "burst " + *row.burst_text + " is not a number";
  if (row.burst < 1) return "burst " + std::to_string(row.burst) + " is below 1";
  return {};
}

bool sends_now(const storage::subscriber_row& row) {
  return row.active && row.rate_per_sec > 0 && limits_problem(row).empty();
}

namespace {

// Another program can store anything in these columns: what cannot be used is clamped or turned
// off, and said once (relief_problem), rather than stop the subscriber's deliveries.
void derive_relief(const storage::subscriber_row& row, subscriber_settings& out) {
  std::string problems;
  const auto note = [&problems](const std::string& text) {
    problems += problems.empty() ? text : "; " + text;
  };
  out.batch_rows =
      static_cast<int>(std::clamp<std::int64_t>(row.batch_max, 1, proto::max_batch_rows));
  if (row.batch_max != out.batch_rows) {
    note("batch_max " + std::to_string(row.batch_max) + " outside 1.." +
         std::to_string(proto::max_batch_rows) + ", using " + std::to_string(out.batch_rows));
  }
  out.batch_bytes = row.batch_bytes >= 1 && row.batch_bytes <= proto::max_batch_bytes
                        ? row.batch_bytes
                        : proto::max_batch_bytes;
  if (row.batch_bytes != out.batch_bytes) {
    note("batch_bytes " + std::to_string(row.batch_bytes) + " outside 1.." +
         std::to_string(proto::max_batch_bytes) + ", using " + std::to_string(out.batch_bytes));
  }
  double linger = row.batch_linger;
  if (!std::isfinite(linger) || linger < 0 || linger > proto::max_batch_linger_seconds) {
    note("batch_linger outside 0.." +
         std::to_string(static_cast<int>(proto::max_batch_linger_seconds)) + " s, using 0.5 s");
    linger = 0.5;
  }
  out.batch_linger = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(linger));

  if (row.coalesce_key.empty()) {
    out.relief_problem = problems;
    return;
  }
  const auto pointer_problem = proto::coalesce_pointer_problem(row.coalesce_key);
  const auto events_problem = proto::validate_event_patterns(row.coalesce_events);
  const bool window_ok = std::isfinite(row.coalesce_window) && row.coalesce_window > 0 &&
                         row.coalesce_window <= proto::max_coalesce_window_seconds;
  if (!pointer_problem.empty()) {
    note("coalesce_key '" + row.coalesce_key + "' " + pointer_problem + ", not coalescing");
  } else if (!events_problem.empty()) {
    note("coalesce_events: " + events_problem + ", not coalescing");
  } else if (!window_ok) {
    note("coalesce_window outside (0, " +
         std::to_string(static_cast<int>(proto::max_coalesce_window_seconds)) +
         "] s, not coalescing");
  } else {
    out.coalesce = proto::coalesce_rule{.pointer = row.coalesce_key,
                                        .window_seconds = row.coalesce_window,
                                        .event_types = row.coalesce_events};
  }
  out.relief_problem = problems;
}

}  // namespace

subscriber_settings derive_settings(const storage::subscriber_row& row,
                                    const scheduler_config& config) {
  subscriber_settings out;
  out.id = row.id;
  out.url = row.url;
  out.limits_problem = limits_problem(row);
  // Unusable limits pause the subscriber rather than guess at what was meant.
  out.rate = out.limits_problem.empty() ? row.rate_per_sec : 0.0;
  out.burst = out.limits_problem.empty() ? static_cast<double>(row.burst) : 1.0;
  out.active = row.active;
  out.in_flight_cap =
      row.max_in_flight > 0 ? static_cast<int>(row.max_in_flight) : config.per_subscriber_in_flight;
  out.in_flight_cap = std::max(1, out.in_flight_cap);

  derive_relief(row, out);
  out.order = row.order;
  if (out.order) {
    if (auto problem = proto::order_pointer_problem(out.order->pointer); !problem.empty()) {
      // Ordering is never dropped: a pointer that cannot be read orders the whole subscriber.
      const std::string note = "ordered key '" + out.order->pointer + "' " + problem +
                               ", ordering the whole subscriber as one key";
      out.relief_problem += out.relief_problem.empty() ? note : "; " + note;
      out.order->pointer.clear();
    }
  }

  for (const auto& field : row.extra_headers) {
    if (auto problem = proto::extra_header_problem(field); !problem.empty()) {
      out.credentials_problem = "stored " + problem;
      break;
    }
  }
  if (!row.extra_headers.empty() && out.credentials_problem.empty()) {
    out.extra_headers = std::make_shared<const std::vector<proto::header_field>>(row.extra_headers);
  }
  if (!row.proxy.empty()) {
    // A stored proxy that cannot be used holds the subscriber: sending around it would leave
    // through an address the partner (or the operator's firewall) does not expect.
    auto proxy = proto::parse_proxy_url(row.proxy);
    if (!proxy.value) {
      if (out.credentials_problem.empty()) {
        out.credentials_problem =
            "stored proxy " + proto::redact_url(row.proxy) + ": " + proxy.error;
      }
    } else {
      out.proxy = std::make_shared<const proto::proxy_address>(std::move(*proxy.value));
    }
  }

  auto parsed = proto::parse_target_url(row.url);
  if (parsed.value) {
    out.target = std::make_shared<const proto::target>(std::move(*parsed.value));
  } else {
    out.unusable_reason = "malformed URL: " + parsed.error;
  }
  const auto scheme = proto::parse_signing_scheme(row.signing);
  std::string signer_error;
  if (!scheme) {
    if (out.unusable_reason.empty())
      out.unusable_reason = "unknown signing scheme '" + row.signing + "'";
  } else if (auto signer = proto::signer::create(*scheme, row.secret, &signer_error)) {
    out.signer = std::make_shared<const proto::signer>(std::move(*signer));
  } else if (out.unusable_reason.empty()) {
    out.unusable_reason = "unusable secret: " + signer_error;
  }
  return out;
}

}  // namespace surge::engine
