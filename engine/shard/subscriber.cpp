#include "engine/shard/subscriber.hpp"

namespace surge::engine {

subscriber_state::subscriber_state(const storage::subscriber_row& row, subscriber_settings derived,
                                   std::chrono::steady_clock::time_point now, double now_unix,
                                   const scheduler_config& config)
    : settings(std::move(derived)),
      limits(row, settings.rate, settings.burst, now, now_unix, config),
      breaker(config.circuit) {}

}  // namespace surge::engine
