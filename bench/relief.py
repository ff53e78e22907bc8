#!/usr/bin/env python3
"""Spike relief for slow partners: what batches and coalescing buy, measured end to
end with the real `surge drain` against `surge sink` on 127.0.0.1.

    bench/relief.py --surge build/release/tools/surge            # both measurements
    bench/relief.py --surge ... --smoke                           # tiny, for the test suite

(1) Batches: a partner limited to 5 requests/s (burst 10) with 50,000 rows queued, drained with
    batches of 100 until empty, and without batches for --unbatched-seconds (draining 50,000
    rows one per request takes 50,000 / 5 s, almost three hours, so that time is computed from
    the measured rate, and the report says so).
(2) Coalescing: a spike in which each of 10,000 videos gets on average 5 rank updates (Poisson)
    within 10 s, for a cache warmer (unthrottled) coalescing on /data/video_id with a 10 s
    window, and for the same warmer without coalescing: requests sent, rows coalesced.

Prints one JSON document. Nothing is asserted about speed; the script fails only when a run did
not do its job (rows left, a process that did not start).
"""
import argparse
import json
import math
import os
import random
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def log(*parts):
    print("relief:", *parts, file=sys.stderr, flush=True)


class Sink:
    def __init__(self, surge, directory, db):
        self.record = Path(directory, "sink.csv")
        port_file = Path(directory, "sink.port")
        self.process = subprocess.Popen(
            [surge, "sink", "--listen", "127.0.0.1:0", "--db", db, "--port-file", str(port_file),
             "--record", str(self.record)],
            stdout=subprocess.DEVNULL, stderr=open(Path(directory, "sink.err"), "w"))
        deadline = time.time() + 10
        while not port_file.exists() or not port_file.read_text().strip():
            if time.time() > deadline:
                raise RuntimeError("surge sink did not start")
            time.sleep(0.05)
        self.port = int(port_file.read_text().strip())

    def stop(self):
        self.process.terminate()
        self.process.wait(timeout=10)

    def requests(self):
        """(subscriber, batch_size, verdict) per request the sink recorded."""
        out = []
        for line in self.record.read_text().splitlines():
            fields = line.split(",")
            out.append((fields[1], int(fields[-1]), fields[4]))
        return out


def surge_run(surge, *args, check=True):
    return subprocess.run([surge, *args], check=check, capture_output=True, text=True)


def new_queue(surge, directory):
    db = str(Path(directory, "queue.db"))
    surge_run(surge, "migrate", "--db", db)
    return db


def add_subscriber(surge, db, url, *options):
    out = surge_run(surge, "subscriber", "add", "--db", db, "--url", url, "--secret",
                    "relief-bench-secret", *options)
    return int(out.stdout.strip())


def insert_rows(db, rows):
    """rows: (subscriber_id, event_type, payload, created_at)"""
    connection = sqlite3.connect(db)
    with connection:
        connection.executemany(
            "INSERT INTO webhook_delivery (subscriber_id, event_type, payload, created_at) "
            "VALUES (?, ?, ?, ?)", rows)
    connection.close()


def drain(surge, db, *extra):
    started = time.monotonic()
    before = os.times()
    result = subprocess.run([surge, "drain", "--db", db, "--allow-private-targets",
                             "--progress-interval", "0", *extra],
                            capture_output=True, text=True)
    after = os.times()
    if result.returncode != 0:
        raise RuntimeError(f"surge drain exited {result.returncode}: {result.stderr[-2000:]}")
    return {"seconds": round(time.monotonic() - started, 3),
            "cpu_seconds": round((after.children_user - before.children_user) +
                                 (after.children_system - before.children_system), 3),
            "summary": result.stdout.strip().splitlines()[-1]}


def done_rows(db):
    connection = sqlite3.connect(db)
    (done,) = connection.execute("SELECT COUNT(*) FROM webhook_delivery WHERE status = 'done'").fetchone()
    connection.close()
    return done


def batches(surge, rows, unbatched_seconds, batch):
    payload = '{"type":"video.rank_updated","data":{"video_id":"v_8f3k2j9d","rank":%d}}'
    result = {}
    for label, options, extra in (
            ("batches_of_%d" % batch, ["--batch", str(batch)], ["--until-drained"]),
            ("one_per_request", [], ["--duration", str(unbatched_seconds)])):
        with tempfile.TemporaryDirectory(prefix="surge-relief-") as directory:
            db = new_queue(surge, directory)
            sink = Sink(surge, directory, db)
            try:
                sid = add_subscriber(surge, db, f"http://127.0.0.1:{sink.port}/hook/1",
                                     "--rate", "5", "--burst", "10", *options)
                now = time.time()
                insert_rows(db, [(sid, "video.rank_updated", payload % i, now) for i in range(rows)])
                log(f"batches: {label}, {rows} rows")
                run = drain(surge, db, *extra)
            finally:
                sink.stop()
            requests = sink.requests()
            done = done_rows(db)
            run.update({"rows_done": done, "requests": len(requests),
                        "bad_signatures": sum(1 for r in requests if r[2] != "ok")})
            if "--until-drained" in extra:
                if done != rows:
                    raise RuntimeError(f"{label}: {done} of {rows} rows done")
                run["time_to_drain_seconds"] = run["seconds"]
            else:
                # The burst goes at once; the rest at the sustained rate measured after it.
                rate = (done - 10) / run["seconds"]
                run["rows_per_second_after_burst"] = round(rate, 3)
                run["time_to_drain_seconds"] = round((rows - 10) / rate, 1) if rate > 0 else None
                run["time_to_drain_is"] = "computed from the measured rate"
            result[label] = run
    return result


def coalescing(surge, videos, mean_updates, window, seed=1):
    rng = random.Random(seed)

    def poisson(mean):
        # Knuth's method: fine for a small mean.
        limit, k, p = math.exp(-mean), 0, 1.0
        while True:
            p *= rng.random()
            if p <= limit:
                return k
            k += 1

    now = time.time()
    updates = []
    for video in range(videos):
        for _ in range(poisson(mean_updates)):
            updates.append((now - window * rng.random(), video))
    updates.sort()
    payload = '{"type":"video.rank_updated","data":{"video_id":"v%d","rank":%d}}'
    result = {"videos": videos, "rank_updates": len(updates), "window_seconds": window}
    for label, options in (("coalesced", ["--coalesce", "/data/video_id", "--coalesce-window",
                                          str(window), "--coalesce-events",
                                          "video.rank_updated"]),
                           ("not_coalesced", [])):
        with tempfile.TemporaryDirectory(prefix="surge-relief-") as directory:
            db = new_queue(surge, directory)
            sink = Sink(surge, directory, db)
            try:
                sid = add_subscriber(surge, db, f"http://127.0.0.1:{sink.port}/hook/1",
                                     "--rate", "100000", "--burst", "1000", *options)
                insert_rows(db, [(sid, "video.rank_updated", payload % (video, i), created)
                                 for i, (created, video) in enumerate(updates)])
                log(f"coalescing: {label}, {len(updates)} rows")
                run = drain(surge, db, "--until-drained")
            finally:
                sink.stop()
            if done_rows(db) != len(updates):
                raise RuntimeError(f"{label}: not every row done")
            requests = sink.requests()
            run["requests"] = len(requests)
            run["bad_signatures"] = sum(1 for r in requests if r[2] != "ok")
            result[label] = run
    result["requests_saved"] = round(
        1 - result["coalesced"]["requests"] / result["not_coalesced"]["requests"], 3)
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--surge", default="build/release/tools/surge")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for the test suite")
    args = parser.parse_args()
    surge = str(Path(args.surge).resolve())
    if args.smoke:
        report = {"batches": batches(surge, 300, 2, 100),
                  "coalescing": coalescing(surge, 50, 5, 10)}
    else:
        report = {"batches": batches(surge, 50_000, 60, 100),
                  "coalescing": coalescing(surge, 10_000, 5, 10)}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
