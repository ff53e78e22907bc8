#!/usr/bin/env python3
"""End-to-end drain scenarios (docs/benchmarks.md): one command, every scenario.

For each scenario: create a queue file (or PostgreSQL database), start the receiver on 127.0.0.1
(HTTP or HTTPS with a throw-away CA), run `surge drain --until-drained`, then read what happened
from the queue itself (`surge_attempt` holds every attempt's start and finish) and from the kernel
(CPU, peak RSS of the drainer). Scenarios (a) and nginx_* also run `wrk` against the same
receiver with the same body, before and after the drain, and report Surge's rate as a ratio to
the mean. Prints one JSON document and writes it, with a gnuplot chart, to --out.

The rows are queued as a producer writes them (docs/design.md: rows arrive interleaved): event by
event, one row per subscriber, the rows of one event consecutive in id order, so one
subscriber's rows are spread over the whole table (a subscriber with fewer rows drops out of the
later events; (d)'s small subscribers keep their due times). `--layout contiguous` queues each
subscriber's rows together instead, the layout of the figures taken before, on which a claim
or an outcome touches fewer pages; the report and every scenario's result say "layout".

The reference scenarios, nginx_http and nginx_https, drain into nginx (Debian
nginx-light: one worker, `return 204;`, keep-alive, a config written to the scenario's temp
dir), which costs far less per request than `surge sink`, so the drainer's own cost shows: 200,000
rows over 100 unthrottled subscribers, default drain flags, wrk `-t1 -c200`. They report the
ratio to wrk, the drainer's CPU per delivery and wrk's per request, the receiver's CPU per
request under each client (it shares the two cores, so it is part of the ratio), and for HTTPS
the TLS handshakes (full and resumed, from the drain's summary). nginx_throttled_third is
nginx_http with every third subscriber (33) limited to 50/s, burst 10, and given 10 s of rows at
that rate (500 each; the other 67 keep 2,000), so throttled rows sit among the due ones all
through the table: its ratio to wrk is the unthrottled group's rate, and besides the drainer's
CPU per delivery over the whole drain it reports it up to the moment the unthrottled rows were
all done ("until_rate_group_done"), then the throttled subscribers' achieved fraction of their
rate and window violations. The other scenarios need the sink's behaviours (delays, failures,
signature checks) and keep it. nginx_http_seed001 is nginx_http on the other published queue
shape (docs/queue-shapes.md): the same rows in seed001's tables, each with its payload's bytes
and signature stored by the producer and whole-second times; each result says "shape".

The pg_* scenarios put the queue on PostgreSQL instead of a SQLite file: one throw-away
PostgreSQL 15 server per run (bench/pg_queue.py: initdb into a temp dir, a Unix socket only,
shared_buffers=256MB, fsync and synchronous_commit on, so the comparison with SQLite's
synchronous=NORMAL is conservative for PostgreSQL), started by the first pg_* scenario and
stopped at the end, a database per scenario, `surge migrate --db postgresql://...`, rows loaded
with psql's \\copy and read back through psql. pg_nginx_http is nginx_http on it,
pg_nginx_http_x2 and _x3 the same with 2 and 3 drain processes (without wrk), pg_c_fit_x3 is
c_fit_x3 on it. Without the server binaries (Debian postgresql-15) they are skipped, as nginx_*
are without nginx. Each result says "queue": "sqlite" or "postgres". A pg_* result also gives
the server's CPU over the drain, "server_cpu_seconds" and "server_cpu_us_per_delivery": user +
system time of the postmaster and all its processes (the drains' backends, checkpointer, WAL
writer, autovacuum), read from /proc before and after the drain (bench/pg_queue.py
PgServer.cpu_seconds); each scenario's database is dropped once read, so its vacuum does not
fall into the next scenario's drain. With --pg-waits, bench/pg_waits.py samples the drains'
backends in pg_stat_activity and the ungranted locks in pg_locks every 50 ms during the drain,
and the result's "server_waits" gives the top wait events as shares of the samples (its own
backend's CPU is left out of the server's). Every result gives "machine_idle_share", the whole
machine's idle time over the drain's active seconds, from /proc/stat.

    bench/e2e.py                              # the default list, full size (all but pg_*_x2/x3)
    bench/e2e.py --scenarios a_http,d         # some of them
    bench/e2e.py --scenarios nginx_http,nginx_https   # the reference receiver only
    bench/e2e.py --scenarios nginx_http,nginx_http_seed001   # the two queue shapes, same rows
    bench/e2e.py --scenarios nginx_http,nginx_throttled_third   # a third throttled among them
    bench/e2e.py --scenarios pg_nginx_http,pg_nginx_http_x2,pg_nginx_http_x3  # on PostgreSQL
    bench/e2e.py --scenarios pg_nginx_http,pg_nginx_http_x3 --pg-waits   # ... and what they wait on
    bench/e2e.py --smoke                      # one scenario of each kind, tiny (the CI smoke test)
    bench/e2e.py --scenarios nginx_http --layout contiguous   # each subscriber's rows together
    bench/e2e.py --surge build/release/tools/surge --out bench-out

Nothing here asserts a speed: the numbers go to docs/benchmarks.md. The script fails only when a
scenario did not do its job (rows left undelivered, a process that did not start).
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pg_queue
import pg_waits
from e2e_peers import Nginx, Sink, ThreadCpu, cpu_seconds_of, log, nginx_binary, run_wrk, write_pki
from e2e_analysis import analyse
from e2e_queue import BODY, LAYOUTS, any_due, create_shape, outstanding, populate, set_urls
from e2e_scenarios import build_scenarios

def child_of(pid):
    """The one child of `pid` (surge under /usr/bin/time), or None once it has gone."""
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return None
    return int(children[0]) if children else None


def machine_cpu():
    """(time, idle ticks, all ticks) of the whole machine, from /proc/stat's cpu line (idle
    counts iowait too)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return time.time(), fields[3] + fields[4], sum(fields[:8])


def idle_share(snapshots, start, end):
    """The machine's idle share between the snapshots nearest `start` and `end`."""
    first = min(snapshots, key=lambda s: abs(s[0] - start))
    last = min(snapshots, key=lambda s: abs(s[0] - end))
    ticks = last[2] - first[2]
    return round((last[1] - first[1]) / ticks, 3) if ticks > 0 else None


def run_drain(options, directory, db, scenario):
    """Runs the drainer (scenario.drains `surge drain` processes sharing the queue file, each
    under /usr/bin/time) until every one has exited; CPU is summed over them. With a
    scenario.rate_group, the drainers' CPU so far is also read once that group's rows are all
    done (checked every 0.2 s)."""
    # Under /usr/bin/time: the kernel's peak RSS of a process started from this (large) Python
    # process would include this process's own RSS at fork time.
    def timed(index):
        return ["/usr/bin/time", "-f", "%e %U %S %M", "-o", f"time{index}.txt"]
    if scenario.seed_loop:
        commands = [[*timed(0), options.seed_loop, "--db", db]]
    else:
        command = [options.surge, "drain", "--db", db, "--until-drained",
                   "--allow-private-targets", "--progress-interval", "0", *scenario.drain_args,
                   *options.drain_args.split()]
        if scenario.tls:
            command += ["--ca-file", "ca.crt"]
        commands = [[*timed(i), *command] for i in range(scenario.drains)]
    timeout = options.timeout
    logs = [open(Path(directory, "drain.log" if i == 0 else f"drain{i}.log"), "w")
            for i in range(len(commands))]
    started = time.time()
    # A session of its own, so a timeout or Ctrl-C here ends the drainer, not only `time`.
    processes = [subprocess.Popen(c, cwd=directory, stdout=log_file, stderr=subprocess.STDOUT,
                                  start_new_session=True) for c, log_file in zip(commands, logs)]
    watched = [s.id for s in scenario.subscribers if s.group == scenario.stop_when_done]
    stopped_at = None
    rate_ids = [s.id for s in scenario.subscribers if s.group == scenario.rate_group]
    rate_group_done = None
    threads = ThreadCpu()
    machine = [machine_cpu()]  # (time, idle ticks, all ticks), every 0.05 s
    checked_at = 0.0
    try:
        while any(p.poll() is None for p in processes):
            machine.append(machine_cpu())
            for process in processes:
                drainer = child_of(process.pid)
                if drainer:
                    threads.sample(drainer)
            elapsed = time.time() - started
            if elapsed > timeout:
                raise RuntimeError(f"drain still running after {timeout} s")
            # The queue is read every 0.2 s, the drainer's threads every 0.05 s.
            checking = elapsed - checked_at >= 0.2
            if checking:
                checked_at = elapsed
            if (watched and checking and stopped_at is None and elapsed > 0.5
                    and outstanding(db, watched, scenario.shape) == 0):
                for process in processes:
                    drainer = child_of(process.pid)
                    if drainer:
                        stopped_at = time.time()
                        os.kill(drainer, signal.SIGTERM)
            if (rate_ids and checking and rate_group_done is None
                    and not any_due(db, rate_ids, scenario.shape)):
                rate_group_done = {"at": time.time(), "cpu": 0.0}
                for process in processes:
                    drainer = child_of(process.pid)
                    if drainer:
                        try:
                            rate_group_done["cpu"] += cpu_seconds_of(drainer)
                        except OSError:
                            pass  # gone since: its CPU is in /usr/bin/time's figure only
            time.sleep(0.05)
    except BaseException:
        for process in processes:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        raise
    finally:
        for log_file in logs:
            log_file.close()
    finished = time.time()
    machine.append(machine_cpu())
    drained = {"started": started, "finished": finished, "cpu": 0.0, "rss_kb": 0.0,
               "thread_cpu": threads.seconds_by_name(), "machine_cpu": machine}
    handshakes = {"full": 0, "resumed": 0}
    for i, process in enumerate(processes):
        log_text = Path(logs[i].name).read_text()
        if process.returncode != 0 and stopped_at is None:
            raise RuntimeError(f"drain exited {process.returncode}: " + log_text[-2000:])
        # The last line holds the figures; a killed child adds a "Command terminated" line first.
        text = Path(directory, f"time{i}.txt").read_text().split()
        _, user, system, rss_kb = (float(x) for x in text[-4:])
        drained["cpu"] += user + system
        drained["rss_kb"] = max(drained["rss_kb"], rss_kb)
        summary = re.search(r"tls_full=(\d+) tls_resumed=(\d+)", log_text)
        if summary:
            handshakes["full"] += int(summary.group(1))
            handshakes["resumed"] += int(summary.group(2))
    if scenario.tls:
        drained["tls_handshakes"] = handshakes
    if rate_group_done:
        drained["rate_group_done"] = rate_group_done
    return drained


def run_scenario(args, scenario, workdir, pg=None):
    """One scenario; `pg` (a pg_queue.PgServer) holds the queue of a postgres one, a database
    named after the scenario."""
    directory = Path(workdir, scenario.name)
    directory.mkdir()
    db = pg.create_database(scenario.name) if scenario.queue == "postgres" else str(
        directory / "q.db")
    create_shape(db, scenario.shape)
    subprocess.run([args.surge, "migrate", "--db", db], check=True, capture_output=True)
    if scenario.tls:
        write_pki(directory)
    # The sink reads the subscribers' secrets at start, so they go in first; its port is needed
    # for the URLs, so it starts on a file with the subscribers and the URLs are set after.
    placeholder = "http://127.0.0.1:1"
    queued = populate(db, scenario, placeholder, time.time() + args.start_margin, args.layout,
                      scenario.shape)
    if scenario.receiver == "nginx":
        receiver = Nginx(directory, scenario.tls)
    else:
        receiver = Sink(args.surge, directory, db, scenario, args.sink_threads)
    wrk_connections = scenario.wrk_connections or args.wrk_connections
    if args.smoke:  # a second of wrk is no time to open 200 TLS connections on a busy machine
        wrk_connections = min(wrk_connections, args.wrk_connections)
    try:
        scheme_host = (f"https://localhost:{receiver.port}" if scenario.tls
                       else f"http://127.0.0.1:{receiver.port}")
        set_urls(db, placeholder, scheme_host, scenario.shape)
        wrk_runs = []
        if scenario.wrk:
            log(f"{scenario.name}: wrk -c{wrk_connections} before ({args.wrk_seconds} s)")
            wrk_runs.append(run_wrk_measuring(receiver, f"{scheme_host}/hook/1", args.wrk_seconds,
                                              wrk_connections, directory))
        log(f"{scenario.name}: draining {queued} rows for {len(scenario.subscribers)} subscribers"
            f" into {scenario.receiver}")
        # Connected before the server's CPU is read, so its backend's start is not counted.
        sampler = (pg_waits.WaitSampler(db) if scenario.queue == "postgres" and args.pg_waits
                   else None)
        receiver_cpu = receiver.cpu_seconds()
        server_cpu = pg.cpu_seconds() if scenario.queue == "postgres" else None
        if scenario.queue == "postgres" and args.pg_statements:
            pg_queue.reset_statements(db)
        proxy = None
        drain_db = db
        if scenario.queue == "postgres" and args.pg_delay_ms > 0:
            proxy = pg_queue.DelayProxy(pg, args.pg_delay_ms, directory)
            drain_db = proxy.uri(scenario.name)
        try:
            if sampler is not None:
                sampler.start()
            drain = run_drain(args, directory, drain_db, scenario)
        finally:
            if sampler is not None:
                sampler.stop()
            if proxy is not None:
                proxy.stop()
        receiver_cpu = receiver.cpu_seconds() - receiver_cpu
        if server_cpu is not None:
            # Less the sampler's own backend, which is not the drains' doing.
            server_cpu = pg.cpu_seconds() - server_cpu - (sampler.backend_cpu if sampler else 0.0)
        # Read before analyse's own queries.
        statements = (pg_queue.statements(db) if scenario.queue == "postgres"
                      and args.pg_statements else None)
        result = analyse(db, scenario, drain, queued)
        if statements and result["delivered"]:
            result["server_statements"] = [
                {"calls": one["calls"], "rows": one["rows"],
                 "exec_us_per_delivery": round(1000 * one["exec_ms"] / result["delivered"], 2),
                 "plan_us_per_delivery": round(1000 * one["plan_ms"] / result["delivered"], 2),
                 # Work, not time: the times above include waits for a busy machine's cores.
                 "buffers_per_delivery": round(one["blocks"] / result["delivered"], 2),
                 "dirtied_per_delivery": round(one["dirtied"] / result["delivered"], 3),
                 "wal_records_per_delivery": round(one["wal_records"] / result["delivered"], 2),
                 "wal_fpi_per_delivery": round(one["wal_fpi"] / result["delivered"], 3),
                 "statement": one["statement"]} for one in statements]
        # Over the drain's active time (its start to the last delivery), every process's.
        result["machine_idle_share"] = idle_share(drain["machine_cpu"], drain["started"],
                                                  drain["started"] + result["active_seconds"])
        if sampler is not None:
            result["server_waits"] = sampler.report()
        result["program"] = "surge_seed_loop" if scenario.seed_loop else "surge drain"
        result["drain_processes"] = scenario.drains
        result["queue"] = scenario.queue
        result["layout"] = args.layout
        result["shape"] = scenario.shape
        result["receiver"] = "nginx" if scenario.receiver == "nginx" else "surge sink"
        result[f"{scenario.receiver}_cpu_seconds"] = round(receiver_cpu, 3)
        if result["delivered"]:
            result[f"{scenario.receiver}_cpu_us_per_delivery"] = round(
                1e6 * receiver_cpu / result["delivered"], 2)
        if server_cpu is not None:
            # Every process of the PostgreSQL server over the drain: the drains' backends and
            # its own (checkpointer, WAL writer, autovacuum); the server shares the two cores.
            result["server_cpu_seconds"] = round(server_cpu, 3)
            result["server_cpu_us_per_delivery"] = (
                round(1e6 * server_cpu / result["delivered"], 1) if result["delivered"] else None)
        if scenario.wrk:
            log(f"{scenario.name}: wrk after")
            wrk_runs.append(run_wrk_measuring(receiver, f"{scheme_host}/hook/1", args.wrk_seconds,
                                              wrk_connections, directory))
            wrk_rates = [rate for rate, _, _ in wrk_runs]
            result["wrk_connections"] = wrk_connections
            result["wrk_rates"] = wrk_rates
            result["wrk_rate"] = round(sum(wrk_rates) / len(wrk_rates), 1)
            wrk_cpu = [cpu for _, cpu, _ in wrk_runs if cpu is not None]
            result["wrk_cpu_us_per_request"] = (round(1e6 * sum(wrk_cpu) / len(wrk_cpu), 2)
                                                if wrk_cpu else None)
            # The receiver shares the two cores, so what it spends per request under each client
            # is part of the ratio: with both CPU-bound, the ratio is about (wrk + receiver under
            # wrk) / (drain + receiver under the drain), per request.
            receiver_under_wrk = [cpu for _, _, cpu in wrk_runs if cpu is not None]
            result[f"{scenario.receiver}_cpu_us_per_wrk_request"] = (
                round(1e6 * sum(receiver_under_wrk) / len(receiver_under_wrk), 2)
                if receiver_under_wrk else None)
            # With a rate group, its rate: the others' rows trickle in at their limits after it.
            rate = (result[scenario.rate_group]["deliveries_per_second"] if scenario.rate_group
                    else result["deliveries_per_second"])
            result["ratio_to_wrk"] = (round(rate / result["wrk_rate"], 3)
                                      if rate and result["wrk_rate"] else None)
    finally:
        receiver.stop()
    if scenario.queue == "postgres":
        # Read: dropped, so no autovacuum of it runs during a later scenario's drain.
        pg.drop_database(scenario.name)
    expected = queued if scenario.stop_when_done is None else sum(
        scenario.rows_for(s) for s in scenario.subscribers if s.group == scenario.stop_when_done)
    if result["done_rows"] < expected:
        raise RuntimeError(f"{scenario.name}: {result['done_rows']} of {expected} rows done; the "
                           "drain's log ends:\n" + Path(directory, "drain.log").read_text()[-2000:])
    return result


def run_wrk_measuring(receiver, url, seconds, connections, directory):
    """run_wrk, and the receiver's CPU seconds per request it answered wrk (rate x seconds)."""
    before = receiver.cpu_seconds()
    rate, wrk_cpu = run_wrk(url, seconds, connections, directory, BODY)
    spent = receiver.cpu_seconds() - before
    return rate, wrk_cpu, (spent / (rate * seconds) if rate else None)


def write_chart(results, out):
    data = Path(out, "timeline.dat")
    names = [name for name in results if results[name].get("timeline")]
    with open(data, "w") as f:
        for name in names:
            f.write(f'"{name}"\n')
            for second, count in enumerate(results[name]["timeline"]):
                f.write(f"{second + 0.5} {count}\n")
            f.write("\n\n")
    bars = Path(out, "rates.dat")
    with open(bars, "w") as f:
        for name in names:
            r = results[name]
            f.write(f'"{name}" {r.get("deliveries_per_second") or 0} {r.get("wrk_rate", 0)}\n')
    plot = [
        "set terminal pngcairo size 1400,560 font 'DejaVu Sans,10' noenhanced",
        f"set output '{Path(out, 'e2e.png')}'",
        "set multiplot layout 1,2 title 'surge drain, end to end on one machine'",
        "set title 'Deliveries per second over the drain'",
        "set xlabel 'seconds since surge drain started'", "set ylabel 'deliveries completed'",
        "set key outside right top", "set grid",
        "plot " + ", ".join(f"'{data}' index {i} using 1:2 with lines lw 2 title '{name}'"
                            for i, name in enumerate(names)),
        "set title 'Mean rate: surge drain vs wrk on the same sink'",
        "set style data histograms", "set style histogram cluster gap 1",
        "set style fill solid 0.8 border -1", "set xtics rotate by -30", "unset xlabel",
        "set ylabel 'requests per second'", "set key inside right top",
        f"plot '{bars}' using 2:xtic(1) title 'surge drain', '' using 3 title 'wrk'",
        "unset multiplot",
    ]
    subprocess.run(["gnuplot"], input="\n".join(plot), text=True, check=True)


DEFAULT_SCENARIOS = ("nginx_http,nginx_http_seed001,nginx_https,nginx_throttled_third,a_http,a_https,a_http_256,"
                     "a_https_256,a_http_no_origin_limit,a_https_no_origin_limit,half_rate,b,c,"
                     "c_fit,c_fit_x3,d,e_healthy,e,seed_a,seed_nginx,seed_b,nginx_http_x2,"
                     "nginx_http_x3,pg_nginx_http,pg_c_fit_x3")
# One scenario of each kind (receiver, TLS, queue shape, limits, several drains, PostgreSQL, the
# seed loop): the smoke checks that every path of the harness still runs. The variants that
# differ only in a drain flag or a size add nothing to that, nor do those that are slow only
# because they pace (half_rate, b, pg_c_fit_x3: c_fit_x3 and pg_nginx_http take their paths).
SMOKE_SCENARIOS = ("nginx_http,nginx_http_seed001,nginx_https,nginx_throttled_third,a_https,c,"
                   "c_fit_x3,d,e,seed_nginx,pg_nginx_http")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--surge", default="build/release/tools/surge")
    parser.add_argument("--scenarios", default=None,
                        help=f"comma-separated; default: {DEFAULT_SCENARIOS} (with --smoke:"
                             f" {SMOKE_SCENARIOS})")
    parser.add_argument("--seed-loop", default="build/release/bench/surge_seed_loop",
                        help="the naive loop's binary, for the seed_* scenarios")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every size")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, 1 s of wrk (CI)")
    parser.add_argument("--out", default="bench-out")
    parser.add_argument("--wrk-seconds", type=int, default=10)
    parser.add_argument("--wrk-connections", type=int, default=64,
                        help="wrk -c for the surge sink scenarios (nginx_*: 200)")
    parser.add_argument("--sink-threads", type=int, default=1)
    parser.add_argument("--half-rate", type=float, default=None,
                        help="aggregate rate of half_rate; default: half of a_http's, else 5000")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per drain")
    parser.add_argument("--start-margin", type=float, default=2.0,
                        help="(d): the small subscribers' rows fall due from now + this")
    parser.add_argument("--drain-args", default="", help="extra `surge drain` flags, every scenario")
    parser.add_argument("--pg-statements", action="store_true",
                        help="pg_* scenarios: the server loads pg_stat_statements, and each"
                             " result names the statements that took it longest, in µs of"
                             " execution and planning per delivery, with the buffers they"
                             " read and dirtied and the WAL records they wrote per delivery"
                             " (server_statements)")
    parser.add_argument("--pg-delay-ms", type=float, default=0.0,
                        help="pg_* scenarios: the drain reaches PostgreSQL through"
                             " bench/delay_proxy.py, which holds every chunk this long each way"
                             " (a server on another host); 0: the Unix socket directly")
    parser.add_argument("--pg-waits", action="store_true",
                        help="pg_* scenarios: sample the drains' backends in pg_stat_activity"
                             " and the ungranted locks in pg_locks every 50 ms; each result"
                             " gives the top wait events as shares of the samples"
                             " (server_waits, bench/pg_waits.py)")
    parser.add_argument("--layout", choices=LAYOUTS, default="interleaved",
                        help="the rows in id order: interleaved as a producer's fan-out writes"
                             " them (one row per subscriber per event), or each subscriber's"
                             " rows together (contiguous, the older figures' layout)")
    parser.add_argument("--no-chart", action="store_true")
    parser.add_argument("--replot", metavar="JSON", help="only draw the chart of an earlier run")
    args = parser.parse_args()
    if args.replot:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        write_chart(json.loads(Path(args.replot).read_text())["scenarios"], args.out)
        return
    if args.smoke:
        args.scale, args.wrk_seconds = min(args.scale, 0.01), 1
    if args.scenarios is None:
        args.scenarios = SMOKE_SCENARIOS if args.smoke else DEFAULT_SCENARIOS
    args.surge = str(Path(args.surge).resolve())
    if not os.access(args.surge, os.X_OK):
        sys.exit(f"no surge binary at {args.surge} (build the release preset first)")
    wanted = [name.strip() for name in args.scenarios.split(",") if name.strip()]
    args.seed_loop = str(Path(args.seed_loop).resolve())
    if any(name.startswith("seed_") for name in wanted) and not os.access(args.seed_loop, os.X_OK):
        sys.exit(f"no seed loop binary at {args.seed_loop} (build target surge_seed_loop)")
    known = build_scenarios(args.scale, 5000.0)
    unknown = [name for name in wanted if name not in known]
    if unknown:
        sys.exit(f"unknown scenario(s) {', '.join(unknown)}; known: {', '.join(known)}")
    Path(args.out).mkdir(parents=True, exist_ok=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, cwd=Path(__file__).parent).stdout.strip()
    report = {"commit": commit, "cores": os.cpu_count(), "load_before": os.getloadavg()[0],
              "scale": args.scale, "layout": args.layout, "extra_drain_args": args.drain_args,
              "pg_delay_ms": args.pg_delay_ms, "pg_waits": args.pg_waits,
              "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
              "scenarios": {}}
    pg = None  # one PostgreSQL server for every postgres scenario, started by the first
    try:
        with tempfile.TemporaryDirectory(prefix="surge-e2e-") as workdir:
            for name in wanted:
                half = args.half_rate
                if half is None:
                    a = report["scenarios"].get("a_http")
                    half = a["deliveries_per_second"] / 2 if a else 5000.0
                scenario = build_scenarios(args.scale, half)[name]
                if scenario.receiver == "nginx" and not nginx_binary():
                    log(f"{name}: skipped, nginx is not installed (Debian package nginx-light)")
                    report["scenarios"][name] = {"title": scenario.title,
                                                 "queue": scenario.queue,
                                                 "skipped": "nginx is not installed"}
                    continue
                if scenario.queue == "postgres" and pg is None:
                    if not pg_queue.server_binaries():
                        log(f"{name}: skipped, the PostgreSQL server is not installed (Debian"
                            f" package {pg_queue.PACKAGE})")
                        report["scenarios"][name] = {"title": scenario.title,
                                                     "queue": "postgres",
                                                     "skipped": "PostgreSQL is not installed"}
                        continue
                    log("starting a PostgreSQL server for the postgres scenarios")
                    pg = pg_queue.PgServer(settings=pg_queue.STATEMENT_SETTINGS
                                           if args.pg_statements else ())
                report["scenarios"][name] = run_scenario(args, scenario, workdir, pg)
                summary = {k: v for k, v in report["scenarios"][name].items()
                           if k != "timeline"}
                log(name, json.dumps(summary))
    finally:
        if pg is not None:
            pg.stop()
    report["load_after"] = os.getloadavg()[0]
    Path(args.out, "e2e.json").write_text(json.dumps(report, indent=1) + "\n")
    if not args.no_chart:
        write_chart(report["scenarios"], args.out)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
