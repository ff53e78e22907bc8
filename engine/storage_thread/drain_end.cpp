#include "engine/storage_thread/drain_end.hpp"

namespace surge::engine {

drain_end::step drain_end::next(bool outcomes_left) {
  if (shards_expected_ < 0 || shards_returned_ < shards_expected_) return step::wait;
  switch (stage_) {
    case stage::outcomes: stage_ = stage::quotas; return step::write_outcomes;
    case stage::quotas: stage_ = stage::tokens; return step::write_quotas;
    case stage::tokens: stage_ = stage::written; return step::give_back_tokens;
    case stage::written:
      if (!outcomes_left) {
        stage_ = stage::release;
        return step::count_remaining;
      }
      if (abandoned_) {
        ended_ = true;
        return step::give_up;
      }
      // The next round writes them again from the start of the sequence.
      stage_ = stage::outcomes;
      return step::retry_later;
    case stage::release: stage_ = stage::report; return step::release_ownership;
    case stage::report: break;
  }
  ended_ = true;
  return step::report;
}

}  // namespace surge::engine
