#!/usr/bin/env python3
"""Ordered delivery per key: what it costs, measured end to end with the real `surge drain`
against `surge sink` on 127.0.0.1.

    bench/ordered.py --surge build/release/tools/surge            # the measurement
    bench/ordered.py --surge ... --hot                             # one hot key, and ten
    bench/ordered.py --surge ... --smoke                           # tiny, for the test suite

--hot measures what a viral spike looks like first: most events of one video, so one key (and
then ten), --hot-rows rows (300) at a limit of --hot-rate (50/s, burst 10). A key moves one row
per round trip, so the pace is the limit's when the partner answers faster than 1/limit. For each:
the span from first to last arrival at the sink against the limit-bound ideal ((rows - burst) /
rate), as `pace_of_limit` (1.0: exactly the limit).

One subscriber, --keys keys (1,000), --events events per key (30), queued as a producer writes a
spike: one row per key per event, interleaved. The same queue is drained until empty four times:
ordered (`--ordered /video_id`) and unordered, at a limit (--rate, burst a tenth of it) and
without one. For each run: rows per second, CPU seconds per 1,000 deliveries, and how many
deliveries the sink received before an earlier row of their key (0 for every ordered run; the
unordered runs show what ordering prevents).

Prints one JSON document. Nothing is asserted about speed; the script fails only when a run did
not do its job (rows left, an ordered key out of order, a process that did not start).
"""
import argparse
import json
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from relief import Sink, add_subscriber, done_rows, drain, new_queue  # noqa: E402


def log(*parts):
    print("ordered:", *parts, file=sys.stderr, flush=True)


def arrivals(record):
    """(arrival, delivery_id) per request the sink recorded, in arrival order."""
    out = []
    for line in record.read_text().splitlines():
        fields = line.split(",")
        out.append((float(fields[0]), int(fields[2])))
    out.sort()
    return out


def out_of_order(received, key_of):
    """Deliveries received after a later row of their key had been received."""
    newest = {}
    late = 0
    for _, delivery in received:
        key = key_of[delivery]
        if newest.get(key, 0) > delivery:
            late += 1
        newest[key] = max(newest.get(key, 0), delivery)
    return late


def run(surge, keys, events, rate, ordered, burst=None):
    with tempfile.TemporaryDirectory(prefix="surge-ordered-") as directory:
        db = new_queue(surge, directory)
        sink = Sink(surge, directory, db)
        try:
            burst = burst if burst is not None else max(1, rate // 10)
            options = ["--rate", str(rate), "--burst", str(burst)]
            if ordered:
                options += ["--ordered", "/video_id"]
            sid = add_subscriber(surge, db, f"http://127.0.0.1:{sink.port}/hook/1", *options)
            now = time.time()
            payload = '{"type":"video.rank_updated","video_id":"v%d","rank":%d}'
            connection = sqlite3.connect(db)
            with connection:
                connection.executemany(
                    "INSERT INTO webhook_delivery (subscriber_id, event_type, payload, created_at) "
                    "VALUES (?, 'video.rank_updated', ?, ?)",
                    ((sid, payload % (key, event), now) for event in range(events)
                     for key in range(keys)))
            key_of = dict(connection.execute(
                "SELECT id, json_extract(payload, '$.video_id') FROM webhook_delivery"))
            connection.close()
            label = ("ordered" if ordered else "unordered") + f" at {rate}/s"
            log(f"{label}: {keys} keys x {events} events")
            result = drain(surge, db, "--until-drained")
        finally:
            sink.stop()
        rows = keys * events
        if done_rows(db) != rows:
            raise RuntimeError(f"{label}: not every row done")
        received = arrivals(sink.record)
        late = out_of_order(received, key_of)
        if ordered and late:
            raise RuntimeError(f"{label}: {late} deliveries arrived after a later row of their key")
        span = received[-1][0] - received[0][0] if len(received) > 1 else 0.0
        ideal = max(0, rows - burst) / rate
        return {"rows": rows,
                "seconds": result["seconds"],
                "arrival_span_seconds": round(span, 3),
                "pace_of_limit": round(ideal / span, 3) if span > 0 and rate < 1_000_000 else None,
                "rows_per_second": round(rows / result["seconds"], 1),
                "cpu_ms_per_1000_deliveries": round(result["cpu_seconds"] * 1e6 / rows, 1),
                "requests": len(received),
                "received_after_a_later_row_of_their_key": late,
                "summary": result["summary"]}


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--surge", default="build/release/tools/surge")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for the test suite")
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--events", type=int, default=30)
    parser.add_argument("--rate", type=int, default=2000, help="the limit of the limited runs")
    parser.add_argument("--hot", action="store_true", help="one hot key and ten, at a limit")
    parser.add_argument("--hot-rows", type=int, default=300)
    parser.add_argument("--hot-rate", type=int, default=50)
    args = parser.parse_args()
    surge = str(Path(args.surge).resolve())
    if args.hot:
        report = {"rows": args.hot_rows, "rate": args.hot_rate, "burst": 10}
        for keys in (1, 10):
            report[f"keys_{keys}"] = run(surge, keys, args.hot_rows // keys, args.hot_rate, True,
                                         burst=10)
        print(json.dumps(report, indent=2))
        return
    keys, events = (20, 5) if args.smoke else (args.keys, args.events)
    report = {"keys": keys, "events_per_key": events}
    for rate in (args.rate, 1_000_000):
        unordered = run(surge, keys, events, rate, False)
        ordered = run(surge, keys, events, rate, True)
        report[f"rate_{rate}"] = {
            "unordered": unordered, "ordered": ordered,
            "ordered_throughput_ratio": round(ordered["rows_per_second"] /
                                              unordered["rows_per_second"], 3)}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
