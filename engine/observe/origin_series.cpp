#include "engine/observe/origin_series.hpp"

#include <algorithm>
#include <map>
#include <optional>

#include "engine/observe/exposition.hpp"

namespace surge::engine {

namespace {

void keep_lower(std::optional<double>& into, std::optional<double> value) {
  if (value && (!into || *value < *into)) into = value;
}

void keep_higher(std::optional<double>& into, std::optional<double> value) {
  if (value && (!into || *value > *into)) into = value;
}

}  // namespace

std::vector<origin_snapshot> merge_origins(const std::vector<origin_snapshot>& per_shard) {
  std::map<std::string, origin_snapshot> merged;
  for (const auto& shard : per_shard) {
    auto [it, first] = merged.try_emplace(shard.origin, shard);
    if (first) continue;
    auto& into = it->second;
    into.subscribers += shard.subscribers;
    into.rate_limit += shard.rate_limit;
    into.in_flight += shard.in_flight;
    into.limit += shard.limit;
    into.need = into.need && shard.need ? std::optional(*into.need + *shard.need) : std::nullopt;
    into.waiting_for_origin += shard.waiting_for_origin;
    into.waiting_for_shard += shard.waiting_for_shard;
    keep_lower(into.best_latency, shard.best_latency);
    keep_higher(into.usual_latency, shard.usual_latency);
    keep_higher(into.acceptable_latency, shard.acceptable_latency);
    into.judged_by_usual = into.judged_by_usual || shard.judged_by_usual;
  }
  std::vector<origin_snapshot> out;
  out.reserve(merged.size());
  for (auto& [origin, snapshot] : merged) out.push_back(std::move(snapshot));
  return out;
}

void render_origin_series(std::string& out, std::vector<origin_snapshot> origins, std::size_t top) {
  const auto busy = [](const origin_snapshot& o) {
    return o.in_flight + o.waiting_for_origin + o.waiting_for_shard;
  };
  exposition::keep_top(
      origins, top,
      [&](const auto& a, const auto& b) {
        if (busy(a) != busy(b)) return busy(a) > busy(b);
        if (a.rate_limit != b.rate_limit) return a.rate_limit > b.rate_limit;
        return a.origin < b.origin;
      },
      [](const auto& a, const auto& b) { return a.origin < b.origin; });

  struct series {
    const char* name;
    const char* help;
    std::optional<double> (*value)(const origin_snapshot&);
  };
  static constexpr series per_origin[] = {
      {"surge_origin_subscribers", "Subscribers sending to the origin (busiest origins only).",
       [](const origin_snapshot& o) { return std::optional(static_cast<double>(o.subscribers)); }},
      {"surge_origin_rate_limit",
       "Its subscribers' configured requests per second together (busiest origins only).",
       [](const origin_snapshot& o) { return std::optional(o.rate_limit); }},
      {"surge_origin_in_flight_requests",
       "Requests in flight to the origin (busiest origins only).",
       [](const origin_snapshot& o) { return std::optional(static_cast<double>(o.in_flight)); }},
      {"surge_origin_in_flight_limit",
       "The origin's adaptive concurrency limit, summed over shards; absent with the limit off.",
       [](const origin_snapshot& o) {
         return o.limit > 0 ? std::optional(static_cast<double>(o.limit)) : std::nullopt;
       }},
      {"surge_origin_in_flight_need",
       "What its rates need in flight at its acceptable latency, plus 4 per shard: the origin "
       "is held below it; absent until a latency is known.",
       [](const origin_snapshot& o) {
         return o.need ? std::optional(static_cast<double>(*o.need)) : std::nullopt;
       }},
      {"surge_origin_best_latency_seconds",
       "The origin's best answer time of the last 5 to 10 s (lowest over shards).",
       [](const origin_snapshot& o) { return o.best_latency; }},
      {"surge_origin_usual_latency_seconds",
       "Mean plus two standard errors of a sample of answers to requests sent while few were "
       "in flight (the higher of the last two samples; highest over shards); absent until "
       "measured.",
       [](const origin_snapshot& o) { return o.usual_latency; }},
      {"surge_origin_acceptable_latency_seconds",
       "Answers slower than this count as queued and shrink the origin's limit.",
       [](const origin_snapshot& o) { return o.acceptable_latency; }},
      {"surge_origin_judged_by_usual",
       "1 when the usual latency, not the best, sets the acceptable latency: a partner whose "
       "answers vary widely.",
       [](const origin_snapshot& o) {
         return o.limit > 0 ? std::optional(o.judged_by_usual ? 1.0 : 0.0) : std::nullopt;
       }},
  };
  for (const auto& s : per_origin) {
    exposition::header(out, s.name, "gauge", s.help);
    for (const auto& o : origins) {
      if (const auto value = s.value(o)) {
        exposition::value_line(
            out, std::string(s.name) + "{origin=\"" + exposition::label_value(o.origin) + "\"}",
            *value);
      }
    }
  }
  exposition::header(out, "surge_origin_waiting_subscribers", "gauge",
                     "Subscribers with a row ready that wait: for the origin's own limit or "
                     "need (for=\"origin\"), or for a slot of the shard's (for=\"shard\").");
  for (const auto& o : origins) {
    const std::string label = "{origin=\"" + exposition::label_value(o.origin) + "\",for=";
    exposition::value_line(out, "surge_origin_waiting_subscribers" + label + "\"origin\"}",
                           static_cast<double>(o.waiting_for_origin));
    exposition::value_line(out, "surge_origin_waiting_subscribers" + label + "\"shard\"}",
                           static_cast<double>(o.waiting_for_shard));
  }
}

}  // namespace surge::engine
