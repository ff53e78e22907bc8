#!/usr/bin/env python3
"""What an idle `surge drain` costs: a subscriber table and no rows.

    bench/idle_cost.py                         # 10,000 subscribers, 10 s measured
    bench/idle_cost.py --subscribers 1000 --seconds 20
    bench/idle_cost.py --surge /path/to/other/surge   # another build, for an A/B

Half the subscribers are limited to 20/s (their tokens come from the persisted bucket in
leases), half are unthrottled; every URL points at a closed loopback port, since nothing is
sent. The drain runs for --seconds after --settle seconds of start-up; its CPU over that window
comes from /proc/<pid>/stat, and the commits and WAL frames of the whole run from its last log
line ("storage: N commits wrote M WAL frames ..."), so a run longer by D seconds shows what the
idle drain writes per D seconds. Prints one JSON object; wrap it in `flock /tmp/bench.lock` on
a shared machine. Nothing here asserts a figure.
"""
import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from e2e_peers import cpu_seconds_of  # noqa: E402
from storage_io import storage_line  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--surge", default="build/release/tools/surge")
    parser.add_argument("--subscribers", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--settle", type=float, default=2)
    parser.add_argument("--drain-args", default="", help="extra `surge drain` flags")
    args = parser.parse_args()
    surge = str(Path(args.surge).resolve())
    with tempfile.TemporaryDirectory() as directory:
        db = str(Path(directory, "q.db"))
        subprocess.run([surge, "migrate", "--db", db], check=True, capture_output=True)
        connection = sqlite3.connect(db)
        with connection:
            connection.executemany(
                "INSERT INTO webhook_subscriber (id, url, secret, event_types, rate_per_sec,"
                " burst, tokens, tokens_updated_at, active)"
                " VALUES (?, 'http://127.0.0.1:9/idle', 's3cret', '*', ?, 10, 10, 0, 1)",
                [(i, 1e6 if i % 2 else 20.0) for i in range(1, args.subscribers + 1)])
        connection.close()
        duration = args.settle + args.seconds + 1
        log_path = Path(directory, "drain.log")
        with open(log_path, "w") as log_file:
            drain = subprocess.Popen(
                [surge, "drain", "--db", db, "--allow-private-targets", "--progress-interval",
                 "0", "--duration", str(duration), *args.drain_args.split()],
                stdout=log_file, stderr=subprocess.STDOUT)
            time.sleep(args.settle)
            before = cpu_seconds_of(drain.pid)
            time.sleep(args.seconds)
            after = cpu_seconds_of(drain.pid)
            drain.wait(timeout=60)
        log_text = log_path.read_text()
        written = storage_line(log_text)
        if drain.returncode != 0 or written is None:
            sys.exit(f"idle_cost: the drain exited {drain.returncode}:\n{log_text}")
    print(json.dumps({
        "subscribers": args.subscribers,
        "seconds": args.seconds,
        "cpu_ms_per_second": round((after - before) * 1000 / args.seconds, 1),
        "run_seconds": duration,
        "commits": written["commits"],
        "wal_frames": written["frames"],
        "surge": surge,
        "load": os.getloadavg()[0],
    }))


if __name__ == "__main__":
    main()
