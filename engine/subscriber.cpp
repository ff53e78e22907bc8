#include "engine/subscriber.hpp"

#include <algorithm>

namespace surge::engine {

subscriber_settings derive_settings(const storage::subscriber_row& row,
                                    const scheduler_config& config) {
  subscriber_settings out;
  out.id = row.id;
  out.url = row.url;
  out.rate = row.rate_per_sec;
  out.burst = static_cast<double>(row.burst);
  out.active = row.active;
  out.in_flight_cap = row.max_in_flight > 0 ? static_cast<int>(row.max_in_flight)
                                            : config.per_subscriber_in_flight;
  out.in_flight_cap = std::max(1, out.in_flight_cap);

  auto parsed = proto::parse_target_url(row.url);
  if (parsed.value) {
    out.target = std::make_shared<const proto::target>(std::move(*parsed.value));
  } else {
    out.unusable_reason = "malformed URL: " + parsed.error;
  }
  const auto scheme = proto::parse_signing_scheme(row.signing);
  std::string signer_error;
  if (!scheme) {
    if (out.unusable_reason.empty()) out.unusable_reason = "unknown signing scheme '" + row.signing + "'";
  } else if (auto signer = proto::signer::create(*scheme, row.secret, &signer_error)) {
    out.signer = std::make_shared<const proto::signer>(std::move(*signer));
  } else if (out.unusable_reason.empty()) {
    out.unusable_reason = "unusable secret: " + signer_error;
  }
  if (!row.active && out.unusable_reason.empty()) out.unusable_reason = "subscriber inactive";
  return out;
}

subscriber_state::subscriber_state(const storage::subscriber_row& row,
                                   subscriber_settings derived,
                                   boost::asio::any_io_executor executor, double now_unix,
                                   const scheduler_config& config)
    : settings(std::move(derived)),
      bucket(row.rate_per_sec, static_cast<double>(row.burst),
             seeded_tokens(row.tokens, row.tokens_updated_at, row.rate_per_sec,
                           static_cast<double>(row.burst), now_unix),
             std::chrono::steady_clock::now()),
      pace(row.rate_per_sec, config.adaptive),
      breaker(config.circuit),
      wake(std::move(executor)) {}

}  // namespace surge::engine
