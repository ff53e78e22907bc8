"""What the drains' PostgreSQL backends wait on during a drain: `bench/e2e.py --pg-waits` runs
a WaitSampler beside each pg_* scenario's drain.

    sampler = WaitSampler(uri, interval=0.05)   # one psql session on the scenario's database
    sampler.start()
    ...                                          # the drain
    sampler.stop()
    sampler.report()   # top wait events of the drains' backends, share of samples; lock waits

Every `interval` the sampler reads pg_stat_activity (every backend of the scenario's database but
its own, and the server's own processes: WAL writer, checkpointer, autovacuum) and the ungranted
locks of pg_locks, in one query over one psql session that stays open, so sampling opens no
connection and forks no backend. Each sample of a drain's backend counts once under one of:

- `Type:Event` for an active backend with a wait event (`LWLock:WALWrite`, `IO:WALSync`,
  `Lock:transactionid`, `LWLock:BufferContent`, ...);
- `CPU` for an active backend with none (running, or waiting on something PostgreSQL does not
  instrument, such as the run queue of a busy machine);
- `Client:ClientRead (idle in transaction)`: inside a transaction, waiting for the drain to send
  the next statement;
- `idle`: outside a transaction (between two cycles, or a drain's spare session).

The report gives the idle share of the drains' backend samples, each other class's share of the
busy ones (all but idle: what a backend does while it works for a drain or holds a transaction
open), the statements the active waits were in, the server processes' own waits, the ungranted
locks (pg_locks, by lock type, mode and relation), and the server's CPU and context switches by
kind of process (client backends, WAL writer, autovacuum workers, ...) from /proc, each process
from its first to its last sample. The sampler's own backend CPU is measured too, so
bench/e2e.py can leave it out of the server's CPU.
"""
import os
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

import pg_queue

END = "--surge-sample-end--"
SEPARATOR = "\x1f"

# The mark keeps the sampler's statement out of pg_queue.statements() (--pg-statements).
SAMPLE_SQL = f"""
SELECT /* {pg_queue.SAMPLER_MARK} */ 'a', pid, coalesce(state, ''),
       coalesce(wait_event_type, ''), coalesce(wait_event, ''), backend_type,
       left(regexp_replace(query, '\\s+', ' ', 'g'), 60)
FROM pg_stat_activity
WHERE pid <> pg_backend_pid()
  AND (datname = current_database() OR backend_type <> 'client backend')
UNION ALL
SELECT 'l', l.pid, l.locktype, l.mode, coalesce(l.relation::regclass::text, ''), '', ''
FROM pg_locks l WHERE NOT l.granted;
\\echo {END}
"""


def _cpu_split(pid):
    """(user, system) CPU seconds of a process, from /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def _cpu_seconds(pid):
    return sum(_cpu_split(pid))


def _switches(pid):
    """(voluntary, involuntary) context switches of a process so far: a backend blocks (and
    switches voluntarily) on every wait for its client or a lock; an involuntary one is the
    kernel taking its core for another process."""
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if "ctxt_switches:" in line:
            name, value = line.split(":")
            found[name.strip()] = int(value)
    return found.get("voluntary_ctxt_switches", 0), found.get("nonvoluntary_ctxt_switches", 0)


class WaitSampler:
    def __init__(self, uri, interval=0.05):
        self.interval = interval
        self.process = subprocess.Popen(
            [*pg_queue.PSQL, "-A", "-t", "-F", SEPARATOR, "-d", uri], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1)
        self.backend_pid = int(self._ask("SELECT pg_backend_pid();\n\\echo " + END + "\n")[0])
        self.drain_events = Counter()   # class -> samples
        self.drain_statements = Counter()  # (class, statement) -> samples of active waits
        self.server_events = Counter()  # (backend type, class) -> samples
        self.lock_waits = Counter()     # (lock type, mode, relation) -> samples
        self.drain_pids = set()
        self.process_cpu = {}  # pid -> [backend type, CPU seconds at first sight, at last]
        self.samples = 0
        self.drain_samples = 0
        self.backend_cpu = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _ask(self, text):
        self.process.stdin.write(text)
        lines = []
        while True:
            line = self.process.stdout.readline()
            if not line:
                raise RuntimeError("the wait sampler's psql session ended")
            line = line.rstrip("\n")
            if line == END:
                return lines
            if line:
                lines.append(line)

    def start(self):
        self._cpu_at_start = _cpu_seconds(self.backend_pid)
        self._thread.start()

    def _run(self):
        next_at = time.monotonic()
        while not self._stop.is_set():
            self._sample(self._ask(SAMPLE_SQL))
            next_at += self.interval
            self._stop.wait(max(0.0, next_at - time.monotonic()))

    def _sample(self, lines):
        self.samples += 1
        for line in lines:
            kind, pid, first, second, third, backend_type, statement = (
                line.split(SEPARATOR) + [""] * 7)[:7]
            if kind == "l":
                self.lock_waits[(first, second, third)] += 1
                continue
            state, wait_type, wait_event = first, second, third
            self._read_cpu(pid, backend_type)
            if state == "active":
                what = f"{wait_type}:{wait_event}" if wait_event else "CPU"
            elif state == "idle":
                what = "idle"
            elif state.startswith("idle in transaction"):
                # Between two of the drain's statements (the wait event may be unset for an
                # instant around the read): the same wait either way.
                what = f"Client:ClientRead ({state})"
            else:
                what = f"{wait_type}:{wait_event}" if wait_event else (state or "CPU")
            if backend_type == "client backend":
                self.drain_pids.add(pid)
                self.drain_samples += 1
                self.drain_events[what] += 1
                if state == "active":
                    self.drain_statements[(what, statement)] += 1
            elif wait_event not in ("", "WalWriterMain", "CheckpointerMain", "BgWriterMain",
                                    "BgWriterHibernate", "AutoVacuumMain",
                                    "LogicalLauncherMain", "ArchiverMain"):
                self.server_events[(backend_type, what)] += 1

    def _read_cpu(self, pid, backend_type):
        try:
            split = _cpu_split(pid) + _switches(pid)
        except (OSError, ValueError):
            return  # gone since the query, or another server's pid namespace
        seen = self.process_cpu.setdefault(pid, [backend_type, split, split])
        seen[2] = split

    def cpu_by_process_type(self):
        """User and system CPU seconds, and voluntary and involuntary context switches, by
        backend type ('client backend', 'walwriter', 'autovacuum worker', ...), each process
        from its first to its last sample: one that lived less than a sample interval is
        missed."""
        user, system, voluntary, involuntary = Counter(), Counter(), Counter(), Counter()
        for backend_type, first, last in self.process_cpu.values():
            user[backend_type] += last[0] - first[0]
            system[backend_type] += last[1] - first[1]
            voluntary[backend_type] += last[2] - first[2]
            involuntary[backend_type] += last[3] - first[3]
        return {name: {"user": round(user[name], 3), "system": round(system[name], 3),
                       "voluntary_switches": voluntary[name],
                       "involuntary_switches": involuntary[name]}
                for name in sorted(user, key=lambda n: -(user[n] + system[n]))
                if user[name] + system[name] > 0}

    def stop(self):
        self._stop.set()
        self._thread.join()
        try:
            self.backend_cpu = _cpu_seconds(self.backend_pid) - self._cpu_at_start
        except OSError:
            self.backend_cpu = 0.0
        self.process.stdin.close()
        self.process.wait(timeout=10)

    def report(self, top=8):
        def share(count, whole):
            return round(count / whole, 3) if whole else None
        busy = self.drain_samples - self.drain_events["idle"]
        return {
            "samples": self.samples,
            "interval_ms": round(1000 * self.interval),
            "drain_backends": len(self.drain_pids),
            "drain_backend_samples": self.drain_samples,
            "idle_share": share(self.drain_events["idle"], self.drain_samples),
            "busy_samples": busy,
            "top_waits": [{"wait": what, "share": share(count, busy)}
                          for what, count in self.drain_events.most_common(top + 1)
                          if what != "idle"][:top],
            "top_active_statements": [
                {"wait": what, "statement": statement, "share": share(count, busy)}
                for (what, statement), count in self.drain_statements.most_common(top)],
            "server_process_waits": [
                {"process": process, "wait": what, "share_of_samples": share(count, self.samples)}
                for (process, what), count in self.server_events.most_common(top)],
            "lock_waits": [
                {"locktype": locktype, "mode": mode, "relation": relation,
                 "share_of_samples": share(count, self.samples)}
                for (locktype, mode, relation), count in self.lock_waits.most_common(top)],
            "cpu_seconds_by_process": self.cpu_by_process_type(),
            "sampler_backend_cpu_seconds": round(self.backend_cpu, 3),
        }
