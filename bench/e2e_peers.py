"""The receivers bench/e2e.py drains into, and wrk against them: `surge sink` (the scenarios
that need its behaviours) and nginx (the reference), with a throw-away PKI for HTTPS."""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path


def log(*parts):
    print("e2e:", *parts, file=sys.stderr, flush=True)


def write_pki(directory, addresses=("127.0.0.1",)):
    """A CA and a certificate for localhost and `addresses` signed by it, with the openssl CLI."""
    def run(*args):
        subprocess.run(["openssl", *args], cwd=directory, check=True, capture_output=True)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    run("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
        "-subj", "/CN=surge bench CA", "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    run("req", "-new", *ec, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost")
    Path(directory, "server.ext").write_text(
        "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n"
        "extendedKeyUsage=serverAuth\nsubjectAltName="
        + ",".join(["DNS:localhost"] + [f"IP:{a}" for a in addresses]) + "\n")
    run("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", "server.crt", "-days", "2", "-extfile", "server.ext")


def cpu_seconds_of(pid):
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class ThreadCpu:
    """CPU per thread name of running processes (surge names its threads: surge-shard,
    surge-storage, surge-checkpt, ...), from /proc. Call sample() often; a thread's CPU after
    its last sample (at most one interval) is missed, so the sum is a little below the
    process's."""

    def __init__(self):
        self.ticks = {}  # (pid, tid) -> (name, ticks)

    def sample(self, pid):
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            return
        for tid in tids:
            try:
                name = Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip()
                fields = Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            self.ticks[(pid, tid)] = (name, int(fields[11]) + int(fields[12]))

    def seconds_by_name(self):
        total = {}
        for name, ticks in self.ticks.values():
            total[name] = total.get(name, 0) + ticks / os.sysconf("SC_CLK_TCK")
        return total


class Sink:
    def __init__(self, surge, directory, db, scenario, threads):
        self.directory = Path(directory)
        behaviours = {"*": {"delay_ms": scenario.delay_ms}} if scenario.delay_ms else {}
        for sub in scenario.subscribers:
            if sub.behaviour:
                behaviours[str(sub.id)] = sub.behaviour
        (self.directory / "behaviours.json").write_text(json.dumps(behaviours))
        args = [surge, "sink", "--listen", "127.0.0.1:0", "--db", db, "--threads", str(threads),
                "--port-file", "port", "--behaviours", "behaviours.json"]
        if scenario.tls:
            args += ["--tls-cert", "server.crt", "--tls-key", "server.key"]
        self.log_file = open(self.directory / "sink.log", "w")
        self.process = subprocess.Popen(args, cwd=directory, stdout=self.log_file,
                                        stderr=subprocess.STDOUT)
        port_file = self.directory / "port"
        for _ in range(200):
            if port_file.exists() and port_file.read_text().strip():
                break
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        if not (port_file.exists() and port_file.read_text().strip()):
            self.stop()
            raise RuntimeError("sink did not start: " + (self.directory / "sink.log").read_text())
        self.port = int(port_file.read_text())

    def cpu_seconds(self):
        return cpu_seconds_of(self.process.pid)

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log_file.close()


def nginx_binary():
    return "/usr/sbin/nginx" if os.access("/usr/sbin/nginx", os.X_OK) else shutil.which("nginx")


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Nginx:
    """nginx answering 204 to everything: one worker in the foreground (master_process off, so it
    runs as root or not), keep-alive with nginx's defaults, every file under the scenario's dir."""

    def __init__(self, directory, tls, addresses=("127.0.0.1",), delay_ms=0, port=None):
        """Listens on one port of each of `addresses` (bench/origins.py: one origin each). With
        `delay_ms`, every request is read whole and answered 204 that much later, by Debian's
        echo module (libnginx-mod-http-echo: `echo_sleep`, a timer, no blocking), and each
        answer is logged as `<end time> <request time> <uri>` in arrivals.log. A pair
        (fast, slow) answers each request after one or the other at random, half and half: a
        partner whose latency varies widely without queueing."""
        root = Path(directory, "nginx").resolve()
        root.mkdir()
        self.port = port or free_port()
        listens = "".join(f"    listen {a}:{self.port}" + (" ssl;\n" if tls else ";\n")
                          for a in addresses)
        certificate = ""
        if tls:
            # The scenario's throw-away PKI: a P-256 key, a CA the drain gets with --ca-file.
            certificate = (f"    ssl_certificate {Path(directory, 'server.crt').resolve()};\n"
                           f"    ssl_certificate_key {Path(directory, 'server.key').resolve()};\n")
        temp_paths = "".join(f"  {name}_temp_path {root}/{name};\n"
                             for name in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        # 1,600 drain connections (100 subscribers x 16) and wrk's 200 at once; up to the
        # drain's 4,096 in flight over many origins.
        modules, logging, answer = "", "  access_log off;\n", "return 204;"
        if delay_ms:
            modules = "load_module /usr/lib/nginx/modules/ngx_http_echo_module.so;\n"
            logging = ("  log_format arrivals '$msec $request_time $uri';\n"
                       f"  access_log {root}/arrivals.log arrivals buffer=256k;\n")
            sleep = delay_ms / 1000 if isinstance(delay_ms, int) else "$answer_after"
            if not isinstance(delay_ms, int):
                fast, slow = delay_ms
                # $request_id is 32 random hex digits: its last one picks the delay.
                logging += (f'  map $request_id $answer_after {{ "~[0-7]$" {fast / 1000}; '
                            f"default {slow / 1000}; }}\n")
            answer = (f"echo_read_request_body; echo_sleep {sleep}; "
                      "echo_status 204; echo_flush;")
        self.arrivals_log = root / "arrivals.log"
        (root / "nginx.conf").write_text(
            f"{modules}daemon off;\nmaster_process off;\nworker_processes 1;\n"
            f"pid {root}/nginx.pid;\n"
            f"error_log {root}/error.log warn;\nworker_rlimit_nofile 16384;\n"
            "events { worker_connections 8192; }\n"
            f"http {{\n{logging}{temp_paths}"
            f"  server {{\n{listens}{certificate}"
            f"    location / {{ {answer} }}\n  }}\n}}\n")
        self.root = root
        self.log_file = open(root / "stdout", "w")
        self.process = subprocess.Popen(
            [nginx_binary(), "-p", str(root), "-c", str(root / "nginx.conf"),
             "-e", str(root / "error.log")], stdout=self.log_file, stderr=subprocess.STDOUT)
        for _ in range(200):
            if self.process.poll() is not None:
                break
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError("nginx did not start: " + (root / "error.log").read_text())

    def cpu_seconds(self):
        return cpu_seconds_of(self.process.pid)

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGQUIT)  # graceful: finish open requests
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log_file.close()


def run_wrk(url, seconds, connections, directory, body):
    """wrk's rate, and its CPU seconds per request (user + system, from /usr/bin/time)."""
    script = Path(directory, "post.lua")
    script.write_text(
        'wrk.method = "POST"\n'
        f"wrk.body = [[{body}]]\n"
        'wrk.headers["Content-Type"] = "application/json"\n'
        'wrk.headers["X-VVV-Event"] = "video.trending"\n'
        'wrk.headers["X-VVV-Delivery-Id"] = "1"\n'
        'wrk.headers["X-VVV-Attempt"] = "1"\n'
        'wrk.headers["X-VVV-Timestamp"] = tostring(os.time())\n'
        'wrk.headers["X-VVV-Signature"] = "sha256=' + "0" * 64 + '"\n')
    timing = Path(directory, "wrk-time.txt")
    out = subprocess.run(["/usr/bin/time", "-f", "%U %S", "-o", str(timing), "wrk", "-t1",
                          f"-c{connections}", f"-d{seconds}s", "-s", str(script), url],
                         check=True, capture_output=True, text=True).stdout
    if "Non-2xx" in out:
        raise RuntimeError("wrk got non-2xx answers:\n" + out)
    rate = requests = None
    for line in out.splitlines():
        if line.startswith("Requests/sec:"):
            rate = float(line.split()[1])
        match = re.match(r"\s*(\d+) requests in", line)
        if match:
            requests = int(match.group(1))
    if rate is None or requests is None:
        raise RuntimeError("no rate in wrk's output:\n" + out)
    if requests == 0:  # a loaded machine and a 1 s smoke run: the handshakes took it all
        log("wrk completed no request:\n" + out)
        return 0.0, None
    user, system = (float(x) for x in timing.read_text().split()[-2:])
    return rate, (user + system) / requests
