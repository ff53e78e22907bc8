#!/usr/bin/env python3
"""What the drain costs the queue file, and how soon it sees new rows.

    bench/storage_io.py wal                  # WAL frames per delivery over a 50,000-row drain
    bench/storage_io.py wal --layout contiguous   # ... each subscriber's rows together
    bench/storage_io.py wal --strace         # ... and the pwrite64/pread64 calls, per file
    bench/storage_io.py latency              # enqueue to first attempt under steady inflow
    bench/storage_io.py latency --drain-args '--idle-poll-max 0.5'
    bench/storage_io.py latency --queue postgres   # the same on a PostgreSQL queue
    bench/storage_io.py latency --shape seed001    # the same on seed001's queue shape
    bench/storage_io.py wal --queue postgres       # WAL records, bytes, commits, row changes
                                                   # and CPU per delivery on the PostgreSQL
                                                   # server

The receiver is nginx (`return 204;`, one worker, on a loopback port, config in the temp dir) as
in bench/e2e.py's nginx_* scenarios, or `surge sink` with --receiver sink.

`wal`: the a_http shape of bench/e2e.py (unthrottled subscribers, rows queued up front,
interleaved by event as a producer's fan-out writes them, or with --layout contiguous each
subscriber's rows together), drained with --until-drained. The frames come from the drain's last log
line ("storage: N commits wrote M WAL frames ..."), which counts what sqlite3_wal_hook reports
after each commit of the storage connection. --strace also runs the drain under
`strace -f -y -e trace=pwrite64,pread64,fdatasync` and counts the calls by file: a WAL frame is
two pwrite64 calls (24-byte header, then the page); checkpoints write pages into the main file.
strace slows the storage thread, so batches grow and its figures are not the untraced ones.

`latency`: subscribers only, no rows; `surge drain` runs while a separate producer process
inserts rows at --rate per second for --seconds (one transaction per row, each with
created_at = next_attempt_at = the time of its insert once it holds the write lock,
synchronous=NORMAL as every writer of the queue, subscribers picked at random). The
latency of a row is its first surge_attempt.started_at minus created_at; p50/p95/p99 of all rows.
With --shape seed001 the file holds seed001's tables (docs/queue-shapes.md) and the producer
writes what that shape's producer does: the payload's bytes, their stored signature, whole-second
enqueued_at and next_attempt. A whole second cannot time a row, so the producer also notes the
time of each insert in a table of the bench's own (bench_enqueued, in the same transaction), and
the latency is measured from that. With --queue postgres the queue is a database on a throw-away PostgreSQL 15 server (see
bench/pg_queue.py; fsync and synchronous_commit on, so each producer commit waits for its WAL
flush) and the producer is one long-lived `psql` fed one INSERT a row on its stdin (autocommit:
a transaction a row, not a process a row), created_at = next_attempt_at =
extract(epoch from clock_timestamp()) on the server as the INSERT runs.

Wrap runs in `flock /tmp/bench.lock ...` on a shared machine. Nothing here asserts a figure: they
go to docs/benchmarks.md. Prints one JSON object.
"""
import argparse
import json
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pg_queue  # noqa: E402  (latency --queue postgres: a throw-away server, psql)
from e2e_analysis import ms, quantile  # noqa: E402
from e2e_peers import Nginx, Sink  # noqa: E402  (the same nginx and sink as bench/e2e.py)
from e2e_queue import (BODY, LAYOUTS, SHAPES, create_shape, is_postgres, populate,  # noqa: E402
                       set_urls, stored_signature)
from e2e_scenarios import Scenario, Subscriber  # noqa: E402

STORAGE_LINE = re.compile(r"storage: (\d+) commits wrote (\d+) WAL frames for (\d+) attempts")


def log(*parts):
    print("storage_io:", *parts, file=sys.stderr, flush=True)


def prepare(args, directory, scenario, db=None):
    """The queue (a file in `directory`, or the PostgreSQL URI `db`), migrated and filled, and
    its receiver running with the subscribers' URLs pointing at it."""
    db = db or str(Path(directory, "q.db"))
    create_shape(db, args.shape)
    subprocess.run([args.surge, "migrate", "--db", db], check=True, capture_output=True)
    placeholder = "http://127.0.0.1:1"
    queued = populate(db, scenario, placeholder, time.time(), args.layout, args.shape)
    if args.receiver == "nginx":
        sink = Nginx(directory, tls=False)
    else:
        sink = Sink(args.surge, directory, db, scenario, 1)
    set_urls(db, placeholder, f"http://127.0.0.1:{sink.port}", args.shape)
    return db, sink, queued


def drain_command(args, db, *extra):
    return [args.surge, "drain", "--db", db, "--allow-private-targets", "--progress-interval",
            "0", *extra, *args.drain_args.split()]


def storage_line(text):
    found = STORAGE_LINE.findall(text)
    if not found:
        return None
    commits, frames, attempts = (int(x) for x in found[-1])
    return {"commits": commits, "frames": frames, "attempts": attempts}


def strace_counts(path, page_size):
    """pwrite64/pread64/fdatasync calls by file from `strace -f -y` output."""
    calls = {}
    # A call another thread interrupts is split: "pwrite64(... <unfinished ...>" then
    # "<... pwrite64 resumed>"; the first part names the file and the size.
    pattern = re.compile(
        r"(pwrite64|pread64|fdatasync)\(\d+<([^>]*)>(?:, .*, (\d+), \d+)?(?:\)| <unfinished)")
    for line in Path(path).read_text(errors="replace").splitlines():
        match = pattern.search(line)
        if not match:
            continue
        name, file, size = match.group(1), match.group(2), match.group(3)
        kind = "wal" if file.endswith("-wal") else "shm" if file.endswith("-shm") else (
            "db" if file.endswith(".db") else "other")
        key = f"{name}_{kind}"
        calls[key] = calls.get(key, 0) + 1
        if name == "pwrite64" and kind == "wal" and size and int(size) == page_size:
            calls["wal_page_writes"] = calls.get("wal_page_writes", 0) + 1
    return calls


def run_wal(args, directory):
    per = max(1, args.rows // args.subscribers)
    scenario = Scenario("wal", "WAL frames per delivery",
                        [Subscriber(i) for i in range(1, args.subscribers + 1)],
                        lambda sub: per)
    db, sink, queued = prepare(args, directory, scenario)
    try:
        command = drain_command(args, db, "--until-drained")
        if args.strace:
            # No --seccomp-bpf: with it, strace missed half the WAL writes of the drain's threads.
            command = ["strace", "-f", "-y", "-qq", "-e",
                       "trace=pwrite64,pread64,fdatasync", "-o", "trace.txt", *command]
        log(f"draining {queued} rows for {args.subscribers} subscribers")
        started = time.time()
        result = subprocess.run(command, cwd=directory, capture_output=True, text=True,
                                timeout=args.timeout)
        elapsed = time.time() - started
    finally:
        sink.stop()
    if result.returncode != 0:
        raise RuntimeError(f"drain exited {result.returncode}: {result.stderr[-2000:]}")
    connection = sqlite3.connect(db)
    attempts = connection.execute("SELECT count(*) FROM surge_attempt").fetchone()[0]
    done = connection.execute(
        "SELECT count(*) FROM webhook_delivery WHERE status = 'done'").fetchone()[0]
    page_size = connection.execute("PRAGMA page_size").fetchone()[0]
    connection.close()
    out = {"mode": "wal", "layout": args.layout, "rows": queued, "done": done,
           "attempts": attempts,
           "subscribers": args.subscribers, "seconds": round(elapsed, 2),
           "strace": args.strace}
    meter = storage_line(result.stdout + result.stderr)
    if meter:
        out.update({"commits": meter["commits"], "wal_frames": meter["frames"],
                    "wal_frames_per_delivery": round(meter["frames"] / max(1, attempts), 3),
                    "rows_per_commit": round(attempts / max(1, meter["commits"]), 1)})
    if args.strace:
        calls = strace_counts(Path(directory, "trace.txt"), page_size)
        out["calls"] = calls
        out["calls_per_delivery"] = {k: round(v / max(1, attempts), 3) for k, v in calls.items()}
    if done < queued:
        raise RuntimeError(f"{done} of {queued} rows done: {json.dumps(out)}")
    return out


def produce(db, rate, seconds, subscribers, seed, shape="seed000"):
    """One row per transaction at a steady rate, as a web application enqueues them."""
    if is_postgres(db):
        return produce_postgres(db, rate, seconds, subscribers, seed)
    if shape == "seed001":
        return produce_seed001(db, rate, seconds, subscribers, seed)
    rng = random.Random(seed)
    connection = sqlite3.connect(db, timeout=10, isolation_level=None)
    # As docs/design.md has every writer of the queue: with Python's default (FULL) each
    # commit waits for an fsync of the WAL, tens to hundreds of ms on this VM, before the row is
    # visible to anyone, and the figure would measure the disk.
    connection.execute("PRAGMA synchronous=NORMAL")
    started = time.time()
    count = int(rate * seconds)
    for i in range(count):
        wait = started + i / rate - time.time()
        if wait > 0:
            time.sleep(wait)
        connection.execute("BEGIN IMMEDIATE")
        # Taken once the write lock is ours: a wait for the lock (the drain commits too, and
        # Python's busy handler backs off in steps up to 100 ms) is the producer's, not Surge's.
        now = time.time()
        connection.execute(
            "INSERT INTO webhook_delivery (subscriber_id, event_type, payload, next_attempt_at,"
            " created_at) VALUES (?, 'video.trending', ?, ?, ?)",
            (rng.randint(1, subscribers), BODY, now, now))
        connection.execute("COMMIT")
    connection.close()
    return count


def produce_seed001(db, rate, seconds, subscribers, seed):
    """produce() as seed001's producer writes: the payload's bytes and their signature under the
    subscriber's secret, whole seconds; and, for the measurement, the insert's exact time in
    bench_enqueued, in the same transaction."""
    rng = random.Random(seed)
    connection = sqlite3.connect(db, timeout=10, isolation_level=None)
    connection.execute("PRAGMA synchronous=NORMAL")
    connection.execute("CREATE TABLE IF NOT EXISTS bench_enqueued (delivery_id INTEGER PRIMARY"
                       " KEY, at REAL NOT NULL)")
    payload = BODY.encode()
    signatures = {sid: stored_signature(secret, payload) for sid, secret in connection.execute(
        "SELECT id, secret FROM webhook_subscribers")}
    started = time.time()
    count = int(rate * seconds)
    for i in range(count):
        wait = started + i / rate - time.time()
        if wait > 0:
            time.sleep(wait)
        connection.execute("BEGIN IMMEDIATE")
        now = time.time()
        sid = rng.randint(1, subscribers)
        cursor = connection.execute(
            "INSERT INTO webhook_deliveries (subscriber_id, event_type, payload, signature,"
            " enqueued_at, next_attempt) VALUES (?, 'video.trending', ?, ?, ?, ?)",
            (sid, payload, signatures[sid], int(now), int(now)))
        connection.execute("INSERT INTO bench_enqueued (delivery_id, at) VALUES (?, ?)",
                           (cursor.lastrowid, now))
        connection.execute("COMMIT")
    connection.close()
    return count


def produce_postgres(uri, rate, seconds, subscribers, seed):
    """produce() on PostgreSQL: one long-lived psql fed one INSERT a row on its stdin (autocommit,
    so a transaction each; synchronous_commit stays on, so each waits for its WAL flush), with
    created_at = next_attempt_at = the server's clock when the INSERT runs."""
    rng = random.Random(seed)
    psql = subprocess.Popen([*pg_queue.PSQL, "-d", uri], stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, text=True)
    body = pg_queue.literal(BODY)
    started = time.time()
    count = int(rate * seconds)
    try:
        for i in range(count):
            wait = started + i / rate - time.time()
            if wait > 0:
                time.sleep(wait)
            psql.stdin.write(
                "INSERT INTO webhook_delivery (subscriber_id, event_type, payload,"
                " next_attempt_at, created_at) SELECT"
                f" {rng.randint(1, subscribers)}, 'video.trending', {body}, now.t, now.t"
                " FROM (SELECT extract(epoch FROM clock_timestamp())::float8 AS t) AS now;\n")
            psql.stdin.flush()
        psql.stdin.close()
    finally:
        code = psql.wait()
    if code != 0:
        raise RuntimeError(f"the producer's psql exited {code}")
    return count


def pending(db, shape="seed000"):
    if shape != "seed000":
        connection = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            return connection.execute(
                f"SELECT count(*) FROM {SHAPES[shape].deliveries} WHERE NOT"
                f" ({SHAPES[shape].done_rows})").fetchone()[0]
        finally:
            connection.close()
    if is_postgres(db):
        return int(pg_queue.query(
            db, "SELECT count(*) FROM webhook_delivery WHERE status != 'done'")[0][0])
    connection = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        return connection.execute(
            "SELECT count(*) FROM webhook_delivery WHERE status != 'done'").fetchone()[0]
    finally:
        connection.close()


LAGS = ("SELECT min(a.started_at) - d.created_at FROM webhook_delivery d"
        " JOIN surge_attempt a ON a.delivery_id = d.id GROUP BY d.id")
ROWS = "SELECT count(*) FROM webhook_delivery"
SEED001_LAGS = ("SELECT min(a.started_at) - e.at FROM bench_enqueued e"
                " JOIN surge_attempt a ON a.delivery_id = e.delivery_id GROUP BY e.delivery_id")
SEED001_ROWS = "SELECT count(*) FROM webhook_deliveries"


# What the database did, cluster-wide (nothing else uses the throw-away server): WAL records,
# full-page images and bytes, and commits and row changes.
PG_COUNTERS = ("SELECT w.wal_records, w.wal_fpi, w.wal_bytes, d.xact_commit, d.tup_inserted,"
               " d.tup_updated, d.tup_deleted FROM pg_stat_wal w, pg_stat_database d"
               " WHERE d.datname = current_database()")
PG_COUNTER_NAMES = ("wal_records", "wal_fpi", "wal_bytes", "commits", "rows_inserted",
                    "rows_updated", "rows_deleted")


def run_wal_postgres(args, directory):
    """`wal --queue postgres`: what one delivery costs the PostgreSQL server, from its own
    statistics before and after the drain (read once the drain's connections have closed, since
    a backend reports its counts at most once a second and at exit), and the CPU of all the
    server's processes over the drain, from /proc (PgServer.cpu_seconds)."""
    per = max(1, args.rows // args.subscribers)
    scenario = Scenario("wal", "database writes per delivery",
                        [Subscriber(i) for i in range(1, args.subscribers + 1)],
                        lambda sub: per)
    with pg_queue.PgServer() as server:
        uri = server.create_database("wal")
        db, sink, queued = prepare(args, directory, scenario, uri)
        try:
            time.sleep(1.5)
            before = [float(x) for x in pg_queue.query(db, PG_COUNTERS)[0]]
            log(f"draining {queued} rows for {args.subscribers} subscribers (PostgreSQL)")
            server_cpu = server.cpu_seconds()
            started = time.time()
            result = subprocess.run(drain_command(args, db, "--until-drained"), cwd=directory,
                                    capture_output=True, text=True, timeout=args.timeout)
            elapsed = time.time() - started
            server_cpu = server.cpu_seconds() - server_cpu
            time.sleep(1.5)
            after = [float(x) for x in pg_queue.query(db, PG_COUNTERS)[0]]
        finally:
            sink.stop()
        if result.returncode != 0:
            raise RuntimeError(f"drain exited {result.returncode}: {result.stderr[-2000:]}")
        attempts = int(pg_queue.query(db, "SELECT count(*) FROM surge_attempt")[0][0])
        done = int(pg_queue.query(
            db, "SELECT count(*) FROM webhook_delivery WHERE status = 'done'")[0][0])
    delta = {name: after[i] - before[i] for i, name in enumerate(PG_COUNTER_NAMES)}
    out = {"mode": "wal", "queue": "postgres", "layout": args.layout, "rows": queued,
           "done": done,
           "attempts": attempts, "subscribers": args.subscribers, "seconds": round(elapsed, 2),
           "server": delta, "server_cpu_seconds": round(server_cpu, 3),
           "server_cpu_us_per_delivery": round(1e6 * server_cpu / max(1, attempts), 1),
           "per_delivery": {k: round(v / max(1, attempts), 3) for k, v in delta.items()}}
    if done < queued:
        raise RuntimeError(f"{done} of {queued} rows done: {json.dumps(out)}")
    return out


def run_latency(args, directory):
    if args.queue == "postgres":
        with pg_queue.PgServer() as server:
            return measure_latency(args, directory, server.create_database("latency"))
    return measure_latency(args, directory, None)


def measure_latency(args, directory, uri):
    scenario = Scenario("latency", "enqueue to first attempt",
                        [Subscriber(i) for i in range(1, args.subscribers + 1)],
                        lambda sub: 0)
    db, sink, _ = prepare(args, directory, scenario, uri)
    drain_log = open(Path(directory, "drain.log"), "w")
    drain = subprocess.Popen(
        drain_command(args, db, "--duration", str(args.seconds + args.timeout)),
        cwd=directory, stdout=drain_log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        # Let the drain start and its subscribers go idle, as between two spikes.
        time.sleep(args.settle)
        log(f"producing {args.rate}/s for {args.seconds} s over {args.subscribers} subscribers")
        subprocess.run([sys.executable, __file__, "produce", "--db", db, "--rate",
                        str(args.rate), "--seconds", str(args.seconds), "--subscribers",
                        str(args.subscribers), "--shape", args.shape], check=True)
        deadline = time.time() + args.timeout
        while pending(db, args.shape) > 0:
            if time.time() > deadline or drain.poll() is not None:
                raise RuntimeError(f"{pending(db, args.shape)} rows not delivered")
            time.sleep(0.2)
    finally:
        if drain.poll() is None:
            drain.send_signal(signal.SIGTERM)
        try:
            drain.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(drain.pid, signal.SIGKILL)
            drain.wait()
        drain_log.close()
        sink.stop()
    if uri:
        lags = sorted(float(row[0]) for row in pg_queue.query(db, LAGS))
        rows = int(pg_queue.query(db, ROWS)[0][0])
    else:
        seed001 = args.shape == "seed001"
        connection = sqlite3.connect(db)
        lags = sorted(row[0] for row in connection.execute(SEED001_LAGS if seed001 else LAGS))
        rows = connection.execute(SEED001_ROWS if seed001 else ROWS).fetchone()[0]
        connection.close()
    out = {"mode": "latency", "queue": args.queue, "shape": args.shape, "rows": rows, "measured": len(lags),
           "rate": args.rate,
           "seconds": args.seconds, "subscribers": args.subscribers,
           "drain_args": args.drain_args,
           "p50_ms": ms(quantile(lags, 0.50)), "p95_ms": ms(quantile(lags, 0.95)),
           "p99_ms": ms(quantile(lags, 0.99)), "max_ms": ms(lags[-1] if lags else None)}
    # No WAL figures here: the meter counts the WAL's growth, and the producer's commits are in it.
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=["wal", "latency", "produce"])
    parser.add_argument("--surge", default="build/release/tools/surge")
    parser.add_argument("--db", help="produce: the queue file or postgresql:// URI")
    parser.add_argument("--queue", choices=["sqlite", "postgres"], default="sqlite",
                        help="where the queue is (wal, latency): a SQLite file, or a database"
                             " on a throw-away PostgreSQL 15 server (fsync on)")
    parser.add_argument("--shape", choices=sorted(SHAPES), default="seed000",
                        help="latency: the queue's published shape (docs/queue-shapes.md)")
    parser.add_argument("--receiver", choices=["nginx", "sink"], default="nginx",
                        help="what answers the deliveries (nginx: 204 at once, as e2e.py's nginx_*)")
    parser.add_argument("--rows", type=int, default=50_000, help="wal: rows queued up front")
    parser.add_argument("--layout", choices=LAYOUTS, default="interleaved",
                        help="wal: those rows interleaved by event as a producer writes them,"
                             " or each subscriber's rows together (contiguous)")
    parser.add_argument("--subscribers", type=int, default=None,
                        help="unthrottled subscribers (wal: 100, latency: 200)")
    parser.add_argument("--strace", action="store_true", help="wal: count calls with strace")
    parser.add_argument("--rate", type=float, default=500, help="latency: rows per second")
    parser.add_argument("--seconds", type=float, default=20, help="latency: how long")
    parser.add_argument("--settle", type=float, default=3,
                        help="latency: seconds the drain idles before the first row")
    parser.add_argument("--seed", type=int, default=12)
    parser.add_argument("--drain-args", default="", help="extra `surge drain` flags")
    parser.add_argument("--timeout", type=float, default=120, help="seconds to wait for the end")
    parser.add_argument("--keep", action="store_true",
                        help="keep the working directory (not a PostgreSQL server's)")
    args = parser.parse_args()
    if args.subscribers is None:
        args.subscribers = 100 if args.mode == "wal" else 200
    if args.mode == "produce":
        produce(args.db, args.rate, args.seconds, args.subscribers, args.seed, args.shape)
        return
    if args.shape != "seed000" and (args.queue == "postgres" or args.mode == "wal"):
        parser.error("--shape seed001: latency on a SQLite file only")
    if args.queue == "postgres" and args.strace:
        parser.error("--strace: SQLite only (a server's writes are its own processes')")
    if args.queue == "postgres" and not pg_queue.server_binaries():
        sys.exit(f"no PostgreSQL server in {pg_queue.BIN} (Debian package {pg_queue.PACKAGE})")
    args.surge = str(Path(args.surge).resolve())
    directory = tempfile.mkdtemp(prefix="surge-storage-io-")
    if args.mode == "latency":
        result = run_latency(args, directory)
    elif args.queue == "postgres":
        result = run_wal_postgres(args, directory)
    else:
        result = run_wal(args, directory)
    result["surge"] = args.surge
    print(json.dumps(result, indent=2))
    if args.keep:
        log("kept", directory)
    else:
        subprocess.run(["rm", "-rf", directory], check=False)


if __name__ == "__main__":
    main()
