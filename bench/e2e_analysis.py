"""What bench/e2e.py reports of a drain: rates, CPU, lag, in-flight profile and conformance to
the subscribers' limits, all read back from the queue (`surge_attempt` holds every attempt)."""
import sqlite3

import pg_queue
from e2e_queue import SHAPES, is_postgres
from e2e_scenarios import UNLIMITED

WINDOW_EPSILON = 0.001  # seconds of clock slack allowed in the window check


def quantile(sorted_values, q):
    if not sorted_values:
        return None
    index = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[index]


def ms(value):
    return None if value is None else round(value * 1000.0, 3)


def number(text):
    """A numeric column read through psql (text) as the sqlite3 module gives it; None for NULL."""
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        return float(text)


def window_violations(starts, rate, burst):
    """Windows of one second holding more starts than a full bucket allows (burst + rate)."""
    allowed = int(burst + rate + 1e-9)
    return sum(1 for i in range(len(starts) - allowed)
               if starts[i + allowed] - starts[i] < 1.0 - WINDOW_EPSILON)


def in_flight_profile(attempts):
    events = sorted([(a[2], 1) for a in attempts] + [(a[3], -1) for a in attempts],
                    key=lambda e: (e[0], e[1]))
    if not events:
        return 0, 0.0, 0.0
    current = peak = 0
    area = 0.0
    previous = events[0][0]
    for at, step in events:
        area += current * (at - previous)
        previous = at
        current += step
        peak = max(peak, current)
    span = events[-1][0] - events[0][0]
    return peak, (area / span if span > 0 else 0.0), span


def read_outcome(db, shape="seed000"):
    """Every attempt as (subscriber, attempt number, started, finished, status, queued at),
    and the count of done rows, with numbers as numbers from either queue."""
    names = SHAPES[shape]
    attempts_sql = ("SELECT a.subscriber_id, a.attempt, a.started_at, a.finished_at,"
                    f" a.status_code, d.{names.queued_at} FROM surge_attempt a"
                    f" JOIN {names.deliveries} d ON d.id = a.delivery_id ORDER BY a.started_at")
    done_sql = f"SELECT count(*) FROM {names.deliveries} WHERE {names.done_rows}"
    if is_postgres(db):
        attempts = [tuple(number(v) for v in row) for row in pg_queue.query(db, attempts_sql)]
        return attempts, int(pg_queue.query(db, done_sql)[0][0])
    connection = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    attempts = connection.execute(attempts_sql).fetchall()
    done = connection.execute(done_sql).fetchone()[0]
    connection.close()
    return attempts, done


def analyse(db, scenario, drain, queued):
    attempts, done = read_outcome(db, scenario.shape)
    start = drain["started"]
    ok = [a for a in attempts if a[4] is not None and 200 <= a[4] < 300]
    groups = {s.id: s.group for s in scenario.subscribers}
    delay = scenario.delay_ms / 1000.0
    cpu = drain["cpu"]
    last = max((a[3] for a in ok), default=start)
    result = {
        "title": scenario.title, "rows": queued, "subscribers": len(scenario.subscribers),
        "drain_args": " ".join(scenario.drain_args), "tls": scenario.tls,
        "endpoint_delay_ms": scenario.delay_ms, "attempts": len(attempts), "delivered": len(ok),
        "done_rows": done, "wall_seconds": round(drain["finished"] - start, 3),
        "active_seconds": round(last - start, 3),
        "deliveries_per_second": round(len(ok) / (last - start), 1) if last > start else None,
        "cpu_seconds": round(cpu, 3),
        "cpu_seconds_per_1000": round(1000 * cpu / len(ok), 4) if ok else None,
        "cpu_us_per_delivery": round(1e6 * cpu / len(ok), 1) if ok else None,
        "peak_rss_mb": round(drain["rss_kb"] / 1024, 1),
    }
    if ok and drain.get("thread_cpu"):
        # Sampled from /proc every 50 ms (bench/e2e_peers.ThreadCpu): a little below the total.
        result["cpu_us_per_delivery_by_thread"] = {
            name: round(1e6 * seconds / len(ok), 1)
            for name, seconds in sorted(drain["thread_cpu"].items()) if seconds > 0}
    mark = drain.get("rate_group_done")
    if scenario.rate_group:
        # The drainer's CPU per delivery up to the moment the rate group was done (without the
        # tail in which only the limited subscribers' rows are left).
        result["rate_group"] = scenario.rate_group
        before = sum(1 for a in ok if a[3] <= mark["at"]) if mark else 0
        result["until_rate_group_done"] = {
            "seconds": round(mark["at"] - start, 3) if mark else None, "delivered": before,
            "cpu_us_per_delivery": round(1e6 * mark["cpu"] / before, 1) if before else None}
    if scenario.tls and "tls_handshakes" in drain:
        result["tls_handshakes"] = drain["tls_handshakes"]
    by_group = {}
    for a in attempts:
        by_group.setdefault(groups.get(a[0], "main"), []).append(a)
    for group, rows in sorted(by_group.items()):
        first = sorted(a[2] - max(a[5], start) for a in rows if a[1] == 1)
        added = sorted(a[3] - a[2] - delay for a in rows if a[4] is not None and 200 <= a[4] < 300)
        delivered = [a for a in rows if a[4] is not None and 200 <= a[4] < 300]
        group_last = max((a[3] for a in delivered), default=start)
        result[group] = {
            "attempts": len(rows), "delivered": len(delivered),
            "deliveries_per_second": (round(len(delivered) / (group_last - start), 1)
                                      if group_last > start else None),
            "lag_p50_ms": ms(quantile(first, 0.5)), "lag_p99_ms": ms(quantile(first, 0.99)),
            "lag_max_ms": ms(first[-1] if first else None),
            "added_p50_ms": ms(quantile(added, 0.5)), "added_p99_ms": ms(quantile(added, 0.99)),
        }
    peak, mean, span = in_flight_profile(attempts)
    result["in_flight_peak"] = peak
    result["in_flight_mean"] = round(mean, 1)
    if delay > 0 and mean > 0 and span > 0:
        # Little's law: mean in flight / latency is the rate those requests could sustain; the
        # rate is taken over the same span as the mean (first start to last finish).
        result["little_ratio"] = round(len(ok) / span / (mean / delay), 3)
    limited = [s for s in scenario.subscribers if s.rate < UNLIMITED]
    if limited:
        starts = {}
        for a in attempts:
            starts.setdefault(a[0], []).append(a[2])
        violations, fractions = 0, []
        for sub in limited:
            times = starts.get(sub.id, [])
            violations += window_violations(times, sub.rate, sub.burst)
            if len(times) > sub.burst + 5 and times[-1] > times[0]:
                fractions.append((len(times) - sub.burst) / (times[-1] - times[0]) / sub.rate)
        fractions.sort()
        result["window_violations"] = violations
        result["configured_rate_sum"] = round(sum(s.rate for s in limited), 1)
        result["achieved_fraction_of_rate"] = {
            "subscribers": len(fractions), "min": quantile(fractions, 0.0),
            "p5": quantile(fractions, 0.05), "p50": quantile(fractions, 0.5),
            "at_least_95_percent": sum(1 for f in fractions if f >= 0.95)}
        for key in ("min", "p5", "p50"):
            value = result["achieved_fraction_of_rate"][key]
            result["achieved_fraction_of_rate"][key] = None if value is None else round(value, 3)
    timeline = {}
    for a in ok:
        second = int(a[3] - start)
        timeline[second] = timeline.get(second, 0) + 1
    result["timeline"] = [timeline.get(s, 0) for s in range(max(timeline, default=-1) + 1)]
    return result
