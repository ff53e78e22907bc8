#!/usr/bin/env python3
"""Many partner hosts, far away and slow: what a delivery costs when the rows go to many
origins instead of one nginx next door. The real `surge drain` (release build) over HTTPS.

    bench/origins.py --surge build/release/tools/surge origins         # 1, 50, 200 origins
    bench/origins.py --surge build/release/tools/surge slow_partners   # 50 origins, 200/500 ms
    bench/origins.py --surge ... origins --smoke                        # tiny, for the test suite
    bench/origins.py --surge ... origins --proxy                        # direct and via tinyproxy

origins: --rows rows (100,000) over 1,000 unthrottled subscribers, queued interleaved as a
producer's fan-out writes them, sent to 1, 50 and 200 origins: one nginx (`return 204`, one
worker) listening on 127.0.0.1 ... 127.0.0.200, each address an origin (host:port), subscribers
spread round-robin. Reported as ratios to the one-origin run of the same invocation.

slow_partners: 1,000 subscribers at 10/s burst 10 (10,000/s of limits in all) with 200 rows
each, over 50 origins that answer every POST after 200 ms, then 500 ms: `surge sink` with a
delay, listening on 0.0.0.0 so that 127.0.0.1 ... 127.0.0.50 are 50 origins. The time is set
against the limit-bound ideal ((rows - burst) / rate per subscriber) and window violations are
counted twice: from the sink's record (a one-second window holding more than burst + rate
arrivals of one subscriber; the partner's view, skewed when the sink itself runs short of CPU)
and from the attempts' start times the drain wrote (surge_attempt).

--proxy runs every configuration twice, direct and through tinyproxy (Debian's, on loopback,
HTTPS tunnelled with CONNECT, as `--proxy http://...` sends it), one after the other, and
reports the proxied run's rate and CPU as ratios to the direct one's, with the proxy's own CPU
per delivery.

Each run reports: deliveries/s, CPU per delivery (user + system of the drain, /usr/bin/time),
peak RSS, TLS handshakes full and resumed (the drain's summary) and per origin, the peak of
requests in flight and of open connections (its /metrics, sampled every 100 ms), the partner
hosts judged by their usual latency and those holding subscribers back by their own limit (median
over the samples), and WAL frames per delivery (the drain's storage line). Prints one JSON document; fails only when a run did
not do its job (rows left, a process that did not start).
"""
import argparse
import json
import os
import re
import resource
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from e2e_peers import Nginx, ThreadCpu, cpu_seconds_of, write_pki  # noqa: E402


def log(*parts):
    print("origins:", *parts, file=sys.stderr, flush=True)


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for(port, address="127.0.0.1", what="receiver"):
    for _ in range(200):
        try:
            socket.create_connection((address, port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{what} did not start on {address}:{port}")


class Tinyproxy:
    """Debian's tinyproxy on loopback, letting CONNECT through to `connect_port` only."""

    def __init__(self, directory, connect_port):
        self.port = free_port()
        conf = Path(directory, "tinyproxy.conf")
        conf.write_text(f"Port {self.port}\nListen 127.0.0.1\nTimeout 60\nMaxClients 4096\n"
                        f"LogLevel Critical\nLogFile \"{directory}/tinyproxy.log\"\n"
                        f"PidFile \"{directory}/tinyproxy.pid\"\nAllow 127.0.0.1\n"
                        f"ConnectPort {connect_port}\n")
        self.process = subprocess.Popen(["tinyproxy", "-d", "-c", str(conf)],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(self.port, what="tinyproxy")

    def stop(self):
        self.cpu_seconds = cpu_seconds_of(self.process.pid)
        self.process.terminate()
        self.process.wait(timeout=30)


def through_proxy(args, directory, port, run_drain):
    """`run_drain(extra_flags)` direct and, with --proxy, again through tinyproxy: the direct
    run's figures, with the proxied run's under "proxied" and its ratios to the direct one."""
    direct = run_drain(args.drain_args)
    if not args.proxy:
        return direct
    proxy = Tinyproxy(directory, port)
    try:
        proxied = run_drain([*args.drain_args, "--proxy", f"http://127.0.0.1:{proxy.port}"])
    finally:
        proxy.stop()
    proxied["proxy_cpu_us_per_delivery"] = round(
        proxy.cpu_seconds / max(1, proxied["delivered"]) * 1e6, 1)
    proxied["rate_vs_direct"] = round(proxied["deliveries_per_s"] / direct["deliveries_per_s"], 2)
    proxied["cpu_vs_direct"] = round(
        proxied["cpu_us_per_delivery"] / direct["cpu_us_per_delivery"], 2)
    direct["proxied"] = proxied
    return direct


class Sink:
    """`surge sink` over TLS on 0.0.0.0, answering every POST after `delay_ms`."""

    def __init__(self, surge, directory, db, delay_ms, port):
        self.port = port
        behaviours = Path(directory, "behaviours.json")
        behaviours.write_text(json.dumps({"*": {"delay_ms": delay_ms}}))
        self.record = Path(directory, "sink.csv")
        self.process = subprocess.Popen(
            [surge, "sink", "--listen", f"0.0.0.0:{self.port}", "--db", db,
             "--tls-cert", str(Path(directory, "server.crt")),
             "--tls-key", str(Path(directory, "server.key")),
             "--behaviours", str(behaviours), "--record", str(self.record)],
            stdout=subprocess.DEVNULL, stderr=open(Path(directory, "sink.err"), "w"))
        wait_for(self.port, what="surge sink")

    def stop(self):
        self.cpu_seconds = cpu_seconds_of(self.process.pid)
        self.process.terminate()
        self.process.wait(timeout=30)

    def arrivals(self):
        """subscriber id -> sorted arrival times."""
        out = {}
        for line in self.record.read_text().splitlines():
            fields = line.split(",")
            out.setdefault(int(fields[1]), []).append(float(fields[0]))
        for times in out.values():
            times.sort()
        return out


class DelayedNginx:
    """nginx with Debian's echo module, answering every POST 204 after `delay_ms`: a receiver
    the project did not write, on each of `addresses`. Its arrivals come from its access log."""

    def __init__(self, directory, addresses, delay_ms, port):
        self.nginx = Nginx(directory, True, addresses, delay_ms=delay_ms, port=port)

    def stop(self):
        self.cpu_seconds = self.nginx.cpu_seconds()
        self.nginx.stop()

    def arrivals(self):
        """subscriber id -> sorted arrival times (the answer's time less the request's)."""
        out = {}
        for line in self.nginx.arrivals_log.read_text().splitlines():
            end, took, uri = line.split()
            out.setdefault(int(uri.rsplit("/", 1)[1]), []).append(float(end) - float(took))
        for times in out.values():
            times.sort()
        return out


def window_violations(arrivals, rate, burst, extra=0):
    """One-second windows of a subscriber holding more than burst + rate (+ extra) arrivals (1 ms
    slack). extra=1 is the allowance `surge audit` judges by: burst + rate x T + 1."""
    limit = burst + rate + extra
    violations = 0
    for times in arrivals.values():
        start = 0
        for end, t in enumerate(times):
            while t - times[start] > 1.001:
                start += 1
            if end - start + 1 > limit:
                violations += 1
    return violations


def attempt_starts(db):
    """subscriber id -> sorted start times of its attempts (surge_attempt)."""
    connection = sqlite3.connect(db)
    out = {}
    for sid, started in connection.execute(
            "SELECT subscriber_id, started_at FROM surge_attempt ORDER BY started_at"):
        out.setdefault(sid, []).append(started)
    connection.close()
    return out


def queue_rows(surge, directory, subscribers, rows_each, url_of, rate=None, burst=None):
    db = str(Path(directory, "queue.db"))
    subprocess.run([surge, "migrate", "--db", db], check=True, capture_output=True)
    connection = sqlite3.connect(db)
    with connection:
        for sid in range(1, subscribers + 1):
            connection.execute(
                "INSERT INTO webhook_subscriber (id, url, secret, rate_per_sec, burst, active) "
                "VALUES (?, ?, ?, ?, ?, 1)",
                (sid, url_of(sid), f"secret-{sid}", rate if rate else 1_000_000.0,
                 burst if burst else 1_000_000))
        # Interleaved, as a producer's fan-out writes a spike: one row per subscriber per event.
        payload = '{"video_id": 1, "event": "video.trending", "views": 123456}'
        connection.executemany(
            "INSERT INTO webhook_delivery (subscriber_id, event_type, payload, created_at) "
            "VALUES (?, 'video.trending', ?, strftime('%s','now'))",
            ((sid, payload) for _ in range(rows_each) for sid in range(1, subscribers + 1)))
    connection.close()
    return db


class MetricsSampler(threading.Thread):
    def __init__(self, port):
        super().__init__(daemon=True)
        self.port, self.stop_flag = port, threading.Event()
        self.peak = {"surge_in_flight_requests": 0.0, "surge_open_connections": 0.0}
        self.series = {name: [] for name in self.peak}
        # Per sample: the hosts judged by their usual latency, and those whose in flight is
        # held by their own limit (subscribers waiting for it) (surge_origin_* series).
        self.judged_by_usual, self.held_by_origin = [], []

    def run(self):
        while not self.stop_flag.is_set():
            try:
                text = urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics",
                                              timeout=1).read().decode()
                judged = held = 0
                for line in text.splitlines():
                    name, _, value = line.rpartition(" ")
                    if name in self.peak:
                        self.peak[name] = max(self.peak[name], float(value))
                        self.series[name].append(float(value))
                    elif name.startswith("surge_origin_judged_by_usual{"):
                        judged += float(value) == 1
                    elif name.startswith("surge_origin_waiting_subscribers{") and \
                            name.endswith('for="origin"}'):
                        held += float(value) > 0
                self.judged_by_usual.append(judged)
                self.held_by_origin.append(held)
            except OSError:
                pass
            time.sleep(0.1)


def median_of(values):
    """The middle of the drain's samples (0 without any): what it held while it ran, where the
    peak may be one moment."""
    ordered = sorted(values)
    return int(ordered[len(ordered) // 2]) if ordered else 0


PERF = []  # set by --perf: the drain runs under `perf record`
DRAIN_FILE_LIMIT = []  # set by --drain-file-limit: [soft, hard] for the drain's process only


def limit_files():
    """In the drain's child before exec: the file limit a shell or unit would have left."""
    resource.setrlimit(resource.RLIMIT_NOFILE, tuple(DRAIN_FILE_LIMIT))


def last_descendant(pid):
    """The drain under /usr/bin/time (and perf): the end of the chain of only children."""
    found = None
    while True:
        try:
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        except OSError:
            return found
        if not children:
            return found
        pid = found = int(children[0])


def drain(surge, directory, db, extra=()):
    metrics_port = free_port()
    timing = Path(directory, "time.txt")
    stderr_path = Path(directory, "drain.err")
    command = ["/usr/bin/time", "-f", "%e %U %S %M", "-o", str(timing), *PERF, surge, "drain",
               "--db", db, "--until-drained", "--allow-private-targets", "--progress-interval",
               "0", "--ca-file", str(Path(directory, "ca.crt")), "--metrics-listen",
               f"127.0.0.1:{metrics_port}", *extra]
    sampler = MetricsSampler(metrics_port)
    sampler.start()
    threads = ThreadCpu()
    with open(stderr_path, "w") as err, tempfile.TemporaryFile("w+") as out:
        # preexec_fn only when asked: it forks with the sampler's thread running.
        process = subprocess.Popen(command, stdout=out, stderr=err, text=True,
                                   preexec_fn=limit_files if DRAIN_FILE_LIMIT else None)
        while process.poll() is None:
            surge_pid = last_descendant(process.pid)
            if surge_pid is not None:
                threads.sample(surge_pid)
            time.sleep(0.05)
        out.seek(0)
        result = subprocess.CompletedProcess(command, process.returncode, out.read())
    sampler.stop_flag.set()
    sampler.join()
    log_text = stderr_path.read_text()
    if result.returncode != 0:
        raise RuntimeError(f"surge drain exited {result.returncode}: {log_text[-2000:]}")
    elapsed, user, system, rss_kb = (float(x) for x in timing.read_text().split()[-4:])
    summary = result.stdout.strip().splitlines()[-1]
    delivered = int(re.search(r"delivered=(\d+)", summary).group(1))
    full, resumed = (int(x) for x in re.search(r"tls_full=(\d+) tls_resumed=(\d+)",
                                                summary).groups())
    wal = re.search(r"storage: (\d+) commits wrote (\d+) WAL frames", log_text)
    attempts = int(re.search(r"attempts=(\d+)", summary).group(1))
    connection = sqlite3.connect(db)
    failures = dict(connection.execute(
        "SELECT error_class, COUNT(*) FROM surge_attempt WHERE error_class IS NOT NULL "
        "AND error_class != '' GROUP BY error_class").fetchall())
    connection.close()
    return {"seconds": elapsed, "delivered": delivered, "failed_attempts": failures,
            "deliveries_per_s": round(delivered / elapsed, 1),
            "cpu_us_per_delivery": round((user + system) / delivered * 1e6, 1),
            "peak_rss_mb": round(rss_kb / 1024, 1),
            "attempts": attempts, "tls_full": full, "tls_resumed": resumed,
            "peak_in_flight": int(sampler.peak["surge_in_flight_requests"]),
            "median_in_flight": median_of(sampler.series["surge_in_flight_requests"]),
            "median_open_connections": median_of(sampler.series["surge_open_connections"]),
            "peak_open_connections": int(sampler.peak["surge_open_connections"]),
            "origins_judged_by_usual_median": median_of(sampler.judged_by_usual),
            "origins_judged_by_usual_last": sampler.judged_by_usual[-1]
            if sampler.judged_by_usual else 0,
            "origins_holding_subscribers_median": median_of(sampler.held_by_origin),
            "wal_frames_per_delivery": round(int(wal.group(2)) / delivered, 2) if wal else None,
            "deliveries_per_commit": round(delivered / int(wal.group(1)), 1) if wal else None,
            # Sampled from /proc every 50 ms: a little below the process's total.
            "cpu_us_per_delivery_by_thread": {
                name: round(seconds / delivered * 1e6, 1)
                for name, seconds in sorted(threads.seconds_by_name().items()) if seconds > 0}}


def left(db):
    connection = sqlite3.connect(db)
    (n,) = connection.execute(
        "SELECT COUNT(*) FROM webhook_delivery WHERE status != 'done'").fetchone()
    connection.close()
    return n


def origins(args):
    counts = [1, 5] if args.smoke else [1, 50, 200]
    subscribers = 20 if args.smoke else 1000
    rows_each = max(1, (200 if args.smoke else args.rows) // subscribers)
    addresses = [f"127.0.0.{i}" for i in range(1, max(counts) + 1)]
    results = {}
    for count in counts:
        with tempfile.TemporaryDirectory(prefix="surge-origins-") as directory:
            write_pki(directory, addresses)
            nginx = Nginx(directory, True, addresses[:count])
            url_of = (lambda sid: f"https://127.0.0.{1 + sid % count}:{nginx.port}/hook/{sid}")

            def run_drain(flags):
                db = queue_rows(args.surge, directory, subscribers, rows_each, url_of)
                log(f"{count} origins: {subscribers * rows_each} rows"
                    + (" through the proxy" if "--proxy" in flags else ""))
                one = drain(args.surge, directory, db, flags)
                if left(db):
                    raise RuntimeError(f"{left(db)} rows left after the drain")
                for leftover in (db, db + "-wal", db + "-shm"):
                    Path(leftover).unlink(missing_ok=True)
                return one

            try:
                run = through_proxy(args, directory, nginx.port, run_drain)
            finally:
                nginx.stop()
        run["origins"] = count
        run["full_handshakes_per_origin"] = round(run["tls_full"] / count, 1)
        results[f"{count}_origins"] = run
        log(json.dumps(run))
    one = results["1_origins"]
    for run in results.values():
        run["rate_vs_one_origin"] = round(run["deliveries_per_s"] / one["deliveries_per_s"], 2)
        run["cpu_vs_one_origin"] = round(run["cpu_us_per_delivery"] / one["cpu_us_per_delivery"],
                                         2)
    return results


def parse_delay(text):
    """200 -> 200 ms; 50/500 -> (50, 500): half the answers after each."""
    if "/" in text:
        fast, slow = text.split("/")
        return (int(fast), int(slow))
    return int(text)


def delay_name(delay):
    return delay if isinstance(delay, int) else f"{delay[0]}/{delay[1]}"


def slow_partners(args):
    delays = [200] if args.smoke else args.delays
    subscribers = 20 if args.smoke else 1000
    count = 5 if args.smoke else 50
    rows_each = 20 if args.smoke else 200
    rate, burst = 10.0, 10
    addresses = [f"127.0.0.{i}" for i in range(1, count + 1)]
    results = {}
    for delay in delays:
        with tempfile.TemporaryDirectory(prefix="surge-slow-") as directory:
            write_pki(directory, addresses)
            # The sink reads the subscribers' secrets at start: the queue comes first, with
            # the port the sink will listen on.
            port = free_port()
            db = queue_rows(args.surge, directory, subscribers, rows_each,
                            lambda sid: f"https://127.0.0.{1 + sid % count}:{port}/hook/{sid}",
                            rate, burst)
            if args.receiver == "nginx":
                sink = DelayedNginx(directory, addresses, delay, port)
            elif isinstance(delay, int):
                sink = Sink(args.surge, directory, db, delay, port)
            else:
                raise SystemExit("a FAST/SLOW delay needs --receiver nginx")
            log(f"{delay_name(delay)} ms: {subscribers * rows_each} rows over {count} origins")
            try:
                run = drain(args.surge, directory, db, args.drain_args)
            finally:
                sink.stop()
            if left(db):
                raise RuntimeError(f"{left(db)} rows left after the drain")
            arrivals = sink.arrivals()
            starts = attempt_starts(db)
        ideal = (rows_each - burst) / rate
        run.update({"delay_ms": delay_name(delay), "origins": count, "receiver": args.receiver,
                    "receiver_cpu_us_per_delivery": round(
                        sink.cpu_seconds / run["delivered"] * 1e6, 1),
                    "limit_bound_ideal_s": ideal,
                    "ideal_over_time": round(ideal / run["seconds"], 3),
                    "full_handshakes_per_origin": round(run["tls_full"] / count, 1),
                    "connections_opened": run["tls_full"] + run["tls_resumed"],
                    "opened_over_peak_in_flight": round(
                        (run["tls_full"] + run["tls_resumed"]) / max(1, run["peak_in_flight"]),
                        2),
                    "window_violations_at_receiver": window_violations(arrivals, rate, burst),
                    "window_violations_at_receiver_beyond_audit_allowance": window_violations(
                        arrivals, rate, burst, extra=1),
                    "window_violations_of_attempt_starts": window_violations(starts, rate,
                                                                             burst)})
        results[f"{delay_name(delay)}ms"] = run
        log(json.dumps(run))
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scenario", choices=["origins", "slow_partners"])
    parser.add_argument("--surge", default="build/release/tools/surge")
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--drain-args", default="", help="extra drain flags, space-separated")
    parser.add_argument("--delays", type=lambda t: [parse_delay(x) for x in t.split(",")],
                        default=[200, 500],
                        help="slow_partners: answer delays in ms; FAST/SLOW answers each "
                             "request after one or the other, half and half (nginx only)")
    parser.add_argument("--perf", help="profile each drain with perf record into this file")
    parser.add_argument("--drain-file-limit", metavar="SOFT[:HARD]",
                        help="start the drain (only) with this file limit, as a shell or unit "
                             "would, e.g. 1024 (a Debian shell's soft limit) or 1024:1024")
    parser.add_argument("--receiver", choices=["sink", "nginx"], default="sink",
                        help="slow_partners: surge sink, or nginx with Debian's echo module")
    parser.add_argument("--proxy", action="store_true",
                        help="run each configuration direct and again through tinyproxy")
    args = parser.parse_args()
    if args.perf:
        PERF.extend(["perf", "record", "-F", "499", "-g", "-o", args.perf, "--"])
    if args.drain_file_limit:
        soft, _, hard = args.drain_file_limit.partition(":")
        DRAIN_FILE_LIMIT.extend(
            [int(soft), int(hard) if hard else resource.getrlimit(resource.RLIMIT_NOFILE)[1]])
    args.drain_args = args.drain_args.split()
    run = origins if args.scenario == "origins" else slow_partners
    report = {"scenario": args.scenario, "cores": os.cpu_count(),
              "load_before": os.getloadavg()[0], "results": run(args)}
    report["load_after"] = os.getloadavg()[0]
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
