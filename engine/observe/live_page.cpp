#include "engine/observe/live_page.hpp"

#include <algorithm>

#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

namespace surge::engine {

namespace json = boost::json;

namespace {

json::value optional_number(const std::optional<double>& value) {
  if (!value) return nullptr;
  return *value;
}

json::value nonzero_time(double unix_seconds) {
  if (unix_seconds <= 0) return nullptr;
  return unix_seconds;
}

json::array hosts_json(std::vector<origin_snapshot> hosts) {
  std::sort(hosts.begin(), hosts.end(), [](const auto& a, const auto& b) {
    if (a.waiting_for_origin != b.waiting_for_origin) {
      return a.waiting_for_origin > b.waiting_for_origin;
    }
    if (a.in_flight != b.in_flight) return a.in_flight > b.in_flight;
    return a.origin < b.origin;
  });
  json::array out;
  out.reserve(hosts.size());
  for (const auto& host : hosts) {
    out.push_back(json::object{
        {"origin", host.origin},
        {"subscribers", host.subscribers},
        {"rate_limit", host.rate_limit},
        {"in_flight", host.in_flight},
        {"limit", host.limit > 0 ? json::value(host.limit) : json::value(nullptr)},
        {"need", host.need ? json::value(*host.need) : json::value(nullptr)},
        {"best_latency", optional_number(host.best_latency)},
        {"usual_latency", optional_number(host.usual_latency)},
        {"acceptable_latency", optional_number(host.acceptable_latency)},
        {"judged_by_usual", host.judged_by_usual},
        {"waiting_for_host", host.waiting_for_origin},
        {"waiting_for_shard", host.waiting_for_shard},
    });
  }
  return out;
}

}  // namespace

std::string partners_json(const std::vector<partner_row>& rows, std::vector<origin_snapshot> hosts,
                          double now_unix) {
  const auto totals = totals_of(rows);
  json::array partners;
  partners.reserve(rows.size());
  for (const auto& row : rows) {
    partners.push_back(json::object{
        {"subscriber", row.id},
        {"state", partner_state_name(row.state)},
        {"held", holds_rows(row.state)},
        {"reason", row.reason},
        {"since", nonzero_time(row.since_unix)},
        {"until", nonzero_time(row.until_unix)},
        {"rate_limit", row.rate_limit},
        {"paced_rate", row.paced_rate},
        {"achieved_rate", row.achieved_rate},
        {"queued", row.queued},
        {"overdue", row.overdue},
        {"in_flight", row.in_flight},
        {"delivered", row.delivered},
        {"failed", row.failed},
        {"last_error", row.last_error},
        {"last_error_at", nonzero_time(row.last_error_unix)},
        {"eta_seconds", optional_number(row.eta_seconds)},
    });
  }
  json::object out{
      {"now", now_unix},
      {"totals", json::object{{"backlog", totals.backlog},
                              {"held_rows", totals.held_rows},
                              {"held_partners", totals.held_partners},
                              {"eta_seconds", optional_number(totals.eta_seconds)}}},
      {"partners", std::move(partners)},
      {"hosts", hosts_json(std::move(hosts))},
  };
  return json::serialize(out);
}

// Plain HTML and a few lines of script, no external resources: it must work on a host with no
// way out. Text goes in through textContent only, so a partner's error body cannot inject
// markup.
const std::string& live_page_html() {
  static const std::string page = R"html(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>surge drain: partners</title>
<style>
body { font: 14px system-ui, sans-serif; margin: 1em 2em; }
table { border-collapse: collapse; }
th, td { padding: 2px 8px; border-bottom: 1px solid #ddd; text-align: right; }
th { background: #f4f4f4; position: sticky; top: 0; }
td.text { text-align: left; max-width: 40em; overflow-wrap: anywhere; }
tr.held td { background: #fde8e8; }
tr.slow td { background: #fff6dc; }
#status { color: #555; }
</style>
</head>
<body>
<h1>surge drain</h1>
<p id="totals">loading…</p>
<p id="status"></p>
<table id="partners">
<thead><tr><th>subscriber</th><th>state</th><th>why</th><th>queued</th><th>overdue</th>
<th>limit/s</th><th>pace/s</th><th>achieved/s</th><th>in flight</th><th>delivered</th>
<th>failed</th><th>last error</th><th>ETA</th></tr></thead>
<tbody></tbody>
</table>
<h2>partner hosts</h2>
<p>Requests in flight to each host against its adaptive limit and its need (its subscribers'
rates × its acceptable latency); answers slower than the acceptable latency count as queued.
Hosts holding subscribers back come first.</p>
<table id="hosts">
<thead><tr><th>host</th><th>subscribers</th><th>limit/s</th><th>in flight</th><th>limit</th>
<th>need</th><th>best ms</th><th>usual ms</th><th>acceptable ms</th><th>waiting for host</th>
<th>waiting for shard</th></tr></thead>
<tbody></tbody>
</table>
<script>
"use strict";
function clock(seconds) {
  if (seconds === null || seconds === undefined) return "--:--";
  const s = Math.round(seconds);
  const two = (n) => String(n).padStart(2, "0");
  if (s >= 3600) return Math.floor(s / 3600) + ":" + two(Math.floor(s / 60) % 60) + ":" + two(s % 60);
  return Math.floor(s / 60) + ":" + two(s % 60);
}
function rate(value) { return value >= 10 ? value.toFixed(0) : value.toFixed(2); }
function when(unix, now) {
  if (!unix) return "";
  const ago = Math.round(now - unix);
  return ago >= 0 ? " (" + clock(ago) + " ago)" : " (for " + clock(-ago) + ")";
}
function cell(row, text, cls) {
  const td = document.createElement("td");
  td.textContent = text;
  if (cls) td.className = cls;
  row.appendChild(td);
}
function show(view) {
  const t = view.totals;
  document.getElementById("totals").textContent =
    "backlog " + t.backlog + " | held " + t.held_rows + " rows of " + t.held_partners +
    " partners | ETA " + clock(t.eta_seconds);
  const body = document.querySelector("#partners tbody");
  const rows = [];
  for (const p of view.partners) {
    const tr = document.createElement("tr");
    tr.dataset.subscriber = p.subscriber;
    tr.dataset.state = p.state;
    if (p.held) tr.className = "held";
    else if (p.state === "slowed" || p.state === "quota_paced") tr.className = "slow";
    cell(tr, String(p.subscriber));
    cell(tr, p.state, "text");
    cell(tr, p.reason + when(p.since, view.now) + when(p.until, view.now), "text");
    cell(tr, String(p.queued));
    cell(tr, String(p.overdue));
    cell(tr, rate(p.rate_limit));
    cell(tr, rate(p.paced_rate));
    cell(tr, rate(p.achieved_rate));
    cell(tr, String(p.in_flight));
    cell(tr, String(p.delivered));
    cell(tr, String(p.failed));
    cell(tr, p.last_error + when(p.last_error_at, view.now), "text");
    cell(tr, p.held ? "held" : clock(p.eta_seconds));
    rows.push(tr);
  }
  body.replaceChildren(...rows);
  const ms = (seconds) => (seconds === null ? "" : (seconds * 1000).toFixed(1));
  const hosts = [];
  for (const h of view.hosts) {
    const tr = document.createElement("tr");
    tr.dataset.origin = h.origin;
    if (h.waiting_for_host > 0) tr.className = "slow";
    cell(tr, h.origin, "text");
    cell(tr, String(h.subscribers));
    cell(tr, rate(h.rate_limit));
    cell(tr, String(h.in_flight));
    cell(tr, h.limit === null ? "off" : String(h.limit));
    cell(tr, h.need === null ? "" : String(h.need));
    cell(tr, ms(h.best_latency));
    cell(tr, ms(h.usual_latency));
    cell(tr, ms(h.acceptable_latency) + (h.judged_by_usual ? " (usual)" : ""));
    cell(tr, String(h.waiting_for_host));
    cell(tr, String(h.waiting_for_shard));
    hosts.push(tr);
  }
  document.querySelector("#hosts tbody").replaceChildren(...hosts);
  document.getElementById("status").textContent =
    "updated " + new Date(view.now * 1000).toISOString();
}
async function refresh() {
  try {
    const answer = await fetch("partners.json", { cache: "no-store" });
    if (!answer.ok) throw new Error("HTTP " + answer.status);
    show(await answer.json());
  } catch (error) {
    document.getElementById("status").textContent = "drain not answering: " + error.message;
  }
  setTimeout(refresh, 2000);
}
refresh();
</script>
</body>
</html>
)html";
  return page;
}

}  // namespace surge::engine
