#include "engine/shard/wire_line.hpp"

namespace surge::engine {

wire_line::step wire_line::head_step(const writer& w, gate_view gate, time_point now) {
  if (gate.closed || now >= w.give_up_at) return {verdict::give_up};
  if (gate.paused_until > now) {
    if (gate.paused_until >= w.give_up_at) return {verdict::give_up};
    return {verdict::wait, gate.paused_until};
  }
  const auto wait = gate.wire.try_pass(now, w.fresh_connection);
  if (wait == std::chrono::steady_clock::duration::zero()) return {verdict::pass};
  if (wait >= w.give_up_at - now) return {verdict::give_up};  // a rate of 0, or a token too late
  return {verdict::wait, now + wait};
}

std::optional<bool> wire_line::arrive(const writer& w, gate_view gate, time_point now) {
  if (writers_.empty()) {
    const auto first = head_step(w, gate, now);
    if (first.what != verdict::wait) return first.what == verdict::pass;
  } else if (gate.closed || now >= w.give_up_at) {
    return false;
  }
  writers_.push_back(w);
  return std::nullopt;
}

}  // namespace surge::engine
