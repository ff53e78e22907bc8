// The request an attempt writes (engine/shard/attempts.hpp).
#include "engine/shard/attempts.hpp"

#include <algorithm>

namespace surge::engine {
namespace {

// The request head every row of the subscriber shares, built again when a reload changed its
// target or its extra headers.
std::string_view request_head_for(subscriber_state& sub,
                                  const std::shared_ptr<const proto::target>& target,
                                  std::string_view user_agent) {
  if (sub.request_head_target != target || sub.request_head_extra != sub.settings.extra_headers) {
    sub.request_head = request_head(*target, user_agent, extra_headers_of(sub.settings));
    sub.request_head_target = target;
    sub.request_head_extra = sub.settings.extra_headers;
  }
  return sub.request_head;
}

}  // namespace

void prepare_request(attempt_state& attempt, std::string& request,
                     const std::shared_ptr<const proto::target>& target,
                     const proto::signer& signer, const request_settings& settings,
                     std::chrono::steady_clock::time_point now) {
  auto& sub = *attempt.sub;
  const auto& rows = attempt.rows;
  const double started_unix = attempt.started_unix;
  const auto seconds = static_cast<std::int64_t>(started_unix);
  if (attempt.batched) {
    write_request(request,
                  build_batch_request(*target, signer, {rows.data(), rows.size()}, seconds,
                                      settings.user_agent, extra_headers_of(sub.settings)));
  } else {
    write_delivery_request(request, request_head_for(sub, target, settings.user_agent), signer,
                           rows.front(), seconds);
  }
  // The partner counts arrivals, so its limit is charged at the wire gate, right before the
  // write; an attempt gives up there before its lease (the batch's shortest) gets too short to
  // finish within it.
  double lease = rows.front().lease;
  for (const auto& row : rows) lease = std::min(lease, row.lease);
  const auto lease_left =
      std::chrono::duration<double>(lease - started_unix) - settings.lease_margin;
  attempt.give_up_at =
      now + std::chrono::duration_cast<std::chrono::steady_clock::duration>(lease_left);
}

}  // namespace surge::engine
