"""A throw-away PostgreSQL server for one benchmark run, and the queue read and written through
`psql` (no psycopg here, and no PyPI): bench/e2e.py's pg_* scenarios and
`bench/storage_io.py latency --queue postgres` use it.

    with PgServer() as server:
        uri = server.create_database("pg_nginx_http")   # postgresql:///pg_nginx_http?host=...
        cpu = server.cpu_seconds()                       # the server's CPU so far, from /proc
        execute(uri, "...")
        copy_in(uri, "webhook_delivery", ["subscriber_id", ...], rows)
        query(uri, "SELECT id, last_status FROM webhook_delivery")  # [("1", None), ...]

The server is PostgreSQL 15 from Debian's postgresql-15 (/usr/lib/postgresql/15/bin): `initdb`
into a temp dir, `postgres` listening on a Unix socket in that dir only, user `surge` trusted. As
root (initdb refuses to run as root) the dir goes to the `postgres` OS user and both run as it.
"""
import csv
import io
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

BIN = Path(os.environ.get("SURGE_PG_BIN", "/usr/lib/postgresql/15/bin"))
PACKAGE = "postgresql-15"  # the Debian package with BIN
# How query() has psql print NULL. psql's CSV output does not quote a field that merely equals
# the null string (a '\N' text comes back as \N), so the marker is one no queue column holds:
# unit separators around a word.
NULL = "\x1fNULL\x1f"
PSQL = ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1"]


def server_binaries():
    """BIN when it holds initdb and postgres, else None."""
    ok = all(os.access(BIN / name, os.X_OK) for name in ("initdb", "postgres"))
    return BIN if ok and shutil.which("psql") else None


def literal(value):
    """A SQL string literal (standard_conforming_strings is on: only quotes are doubled)."""
    return "'" + str(value).replace("'", "''") + "'"


def identifier(name):
    return '"' + str(name).replace('"', '""') + '"'


def _run_psql(uri, arguments, **kwargs):
    result = subprocess.run([*PSQL, *arguments, "-d", uri], capture_output=True, text=True,
                            **kwargs)
    if result.returncode != 0:
        raise RuntimeError(f"psql {' '.join(arguments)} on {uri} exited {result.returncode}: "
                           f"{result.stderr.strip()[-2000:]}")
    return result.stdout


def query(uri, sql):
    """The rows of `sql` (its last statement) as tuples of str, None for NULL."""
    out = _run_psql(uri, ["--csv", "-t", "-P", f"null={NULL}", "-c", sql])
    # csv.reader on the whole text: a quoted field may hold a newline. An empty line is a
    # one-column row holding '' (csv.reader gives it as []).
    return [tuple(None if field == NULL else field for field in row) if row else ("",)
            for row in csv.reader(io.StringIO(out))]


def execute(uri, sql):
    """Runs `sql` (one or more statements, autocommit unless it says BEGIN)."""
    _run_psql(uri, ["-c", sql])


def copy_in(uri, table, columns, rows):
    """Streams `rows` (an iterable of sequences: None is NULL, '' an empty string) into
    `table` through psql's \\copy ... FROM pstdin in CSV. Returns the number of rows."""
    command = (f"\\copy {table} ({', '.join(columns)}) FROM pstdin WITH (FORMAT csv)")
    with tempfile.TemporaryFile("w+") as errors:
        # stderr to a file: a pipe nobody reads while we write could fill and stall psql.
        process = subprocess.Popen([*PSQL, "-d", uri, "-c", command], stdin=subprocess.PIPE,
                                   stdout=subprocess.DEVNULL, stderr=errors, text=True)
        count = 0
        try:
            for row in rows:
                process.stdin.write(",".join(map(_csv_field, row)) + "\n")
                count += 1
            process.stdin.close()
        except BrokenPipeError:
            pass  # psql stopped on an error: reported below
        finally:
            code = process.wait()
        if code != 0:
            errors.seek(0)
            raise RuntimeError(f"\\copy into {table} exited {code}: {errors.read()[-2000:]}")
    return count


def _csv_field(value):
    """One field of a COPY ... (FORMAT csv) row: None bare and empty (NULL), text always quoted
    (so '' stays an empty string), numbers as Python prints them (a float's repr reads back as
    the same double)."""
    if value is None:
        return ""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return repr(value)
    return '"' + str(value).replace('"', '""') + '"'


def _cpu_ticks(pid):
    """utime, stime, cutime, cstime of a process (clock ticks), from /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return tuple(int(field) for field in fields[11:15])


def _children(pid):
    """The process ids of `pid`'s children (from each of its threads' children file)."""
    return [int(child) for task in os.listdir(f"/proc/{pid}/task")
            for child in Path(f"/proc/{pid}/task/{task}/children").read_text().split()]


def _free_port():
    # The server listens on its own socket dir only; a free TCP port number just keeps its
    # socket name (and `ps` line) apart from any other server's.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class PgServer:
    """initdb + postgres in a temp dir; stop() (or leaving the `with`) shuts it down and
    removes the dir."""

    def __init__(self, shared_buffers="256MB", prefix="surge-pg-", timeout=60, settings=()):
        binaries = server_binaries()
        if binaries is None:
            raise RuntimeError(f"no PostgreSQL server binaries in {BIN} (Debian package "
                               f"{PACKAGE})")
        self.process = None
        self.directory = Path(tempfile.mkdtemp(prefix=prefix))
        self.data = self.directory / "data"
        self.port = _free_port()
        self.as_user = {}
        try:
            if os.geteuid() == 0:
                # initdb (and postgres) refuse to run as root: both run as the postgres OS user,
                # who must own the dir. Popen's user/group set the ids in the child before exec,
                # so self.process is the postmaster itself and can be signalled directly.
                import pwd
                account = pwd.getpwnam("postgres")
                os.chown(self.directory, account.pw_uid, account.pw_gid)
                self.as_user = {"user": account.pw_uid, "group": account.pw_gid,
                                "extra_groups": []}
            env = dict(os.environ, LC_ALL="C", LANG="C")
            initdb = subprocess.run(
                [str(binaries / "initdb"), "-D", str(self.data), "-U", "surge", "-A", "trust",
                 "-E", "UTF8", "--no-locale", "--no-sync"],
                cwd=self.directory, env=env, capture_output=True, text=True, **self.as_user)
            if initdb.returncode != 0:
                raise RuntimeError(f"initdb exited {initdb.returncode}: {initdb.stderr[-2000:]}")
            # initdb's postgresql.conf, which for everything that matters here is what Debian's
            # pg_createcluster writes too, except a larger shared_buffers (Debian's 128MB is
            # below a 200,000-row queue with its attempts). fsync and synchronous_commit stay
            # on: each commit waits for the WAL to reach the disk, where the SQLite queue runs
            # synchronous=NORMAL (no fsync per commit in WAL mode), so a comparison of the two
            # is conservative for PostgreSQL.
            self.log_path = self.directory / "server.log"
            self.log_file = open(self.log_path, "w")
            self.process = subprocess.Popen(
                [str(binaries / "postgres"), "-D", str(self.data), "-k", str(self.directory),
                 "-c", "listen_addresses=", "-p", str(self.port),
                 "-c", f"shared_buffers={shared_buffers}",
                 *[part for setting in settings for part in ("-c", setting)]],
                cwd=self.directory, env=env, stdout=self.log_file, stderr=subprocess.STDOUT,
                start_new_session=True,  # a Ctrl-C reaches us, and stop() shuts it down
                **self.as_user)
            self._wait_ready(timeout)
        except BaseException:
            self.stop()
            raise

    def uri(self, database):
        host = urllib.parse.quote(str(self.directory), safe="/")
        return (f"postgresql:///{urllib.parse.quote(database)}?host={host}&port={self.port}"
                f"&user=surge")

    def socket_path(self):
        return str(Path(self.directory, f".s.PGSQL.{self.port}"))

    def _wait_ready(self, timeout):
        deadline = time.time() + timeout
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"postgres exited {self.process.returncode}: "
                                   f"{self.log_path.read_text()[-2000:]}")
            probe = subprocess.run([*PSQL, "-d", self.uri("postgres"), "-c", "SELECT 1"],
                                   capture_output=True, text=True)
            if probe.returncode == 0:
                return
            if time.time() > deadline:
                raise RuntimeError(f"postgres not ready after {timeout} s: "
                                   f"{probe.stderr.strip()} {self.log_path.read_text()[-2000:]}")
            time.sleep(0.1)

    def create_database(self, name):
        """A new, empty database; returns its libpq URI (what `surge --db` takes)."""
        execute(self.uri("postgres"), f"CREATE DATABASE {identifier(name)}")
        return self.uri(name)

    def drop_database(self, name):
        """Drops a database (its sessions ended), so no autovacuum of it runs later."""
        execute(self.uri("postgres"), f"DROP DATABASE IF EXISTS {identifier(name)} WITH (FORCE)")

    def cpu_seconds(self):
        """The server's CPU (user + system) so far: the postmaster's own, its exited children's
        (cutime + cstime) and its live children's (backends, checkpointer, WAL writer,
        autovacuum), from /proc. Read again if a child was reaped meanwhile, so no process is
        counted twice or missed."""
        pid = self.process.pid
        for _ in range(20):
            first = _cpu_ticks(pid)
            live = 0
            try:
                for child in _children(pid):
                    live += sum(_cpu_ticks(child))
            except OSError:
                continue  # a child gone before it was read: the postmaster's cutime moves
            last = _cpu_ticks(pid)
            if last[2:] == first[2:]:
                return (sum(last) + live) / os.sysconf("SC_CLK_TCK")
        raise RuntimeError("the PostgreSQL server's children kept changing while read")

    def stop(self):
        """Fast shutdown (SIGINT to the postmaster: open sessions are ended), then the dir goes."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.send_signal(signal.SIGQUIT)  # immediate shutdown
                try:
                    self.process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    os.killpg(self.process.pid, signal.SIGKILL)
                    self.process.wait()
        if getattr(self, "log_file", None) is not None:
            self.log_file.close()
            self.log_file = None
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        return False


class DelayProxy:
    """bench/delay_proxy.py in front of `server`'s socket, adding `delay_ms` each way; uri() is
    the drain's way to the server through it (TCP on 127.0.0.1)."""

    def __init__(self, server, delay_ms, directory):
        port_file = Path(directory, "delay_proxy.port")
        self.process = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("delay_proxy.py")),
             "--unix", server.socket_path(), "--delay-ms", str(delay_ms),
             "--port-file", str(port_file)])
        deadline = time.time() + 10
        while not port_file.exists() or not port_file.read_text().strip():
            if self.process.poll() is not None or time.time() > deadline:
                self.stop()
                raise RuntimeError("bench/delay_proxy.py did not start")
            time.sleep(0.05)
        self.port = int(port_file.read_text())

    def uri(self, database):
        return f"postgresql://surge@127.0.0.1:{self.port}/{urllib.parse.quote(database)}"

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)


# A server started with these keeps per-statement counts (bench/e2e.py --pg-statements).
STATEMENT_SETTINGS = ("shared_preload_libraries=pg_stat_statements",
                      "pg_stat_statements.track_planning=on")


def reset_statements(uri):
    execute(uri, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements; "
                 "SELECT pg_stat_statements_reset()")


# In the text of bench/pg_waits.py's sampling statement, which statements() leaves out.
SAMPLER_MARK = "surge wait sampler"


def statements(uri, top=10):
    """The statements that took the server longest since reset_statements, each with its calls,
    rows, total execution and planning time in ms, buffers read (hit or not) and dirtied, WAL
    records and full-page images, the longest first (bench/pg_waits.py's
    sampling left out)."""
    rows = query(uri, f"""
        SELECT calls, total_exec_time, total_plan_time, rows, shared_blks_hit + shared_blks_read,
               shared_blks_dirtied, wal_records, wal_fpi,
               left(regexp_replace(query, '\\s+', ' ', 'g'), 90)
        FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database
                                              WHERE datname = current_database())
          AND query NOT LIKE {literal('%' + SAMPLER_MARK + '%')}
        ORDER BY total_exec_time DESC LIMIT {int(top)}""")
    return [{"calls": int(calls), "exec_ms": float(exec_ms), "plan_ms": float(plan_ms),
             "rows": int(count), "blocks": int(blocks), "dirtied": int(dirtied),
             "wal_records": int(records), "wal_fpi": int(fpi), "statement": text}
            for calls, exec_ms, plan_ms, count, blocks, dirtied, records, fpi, text in rows]
