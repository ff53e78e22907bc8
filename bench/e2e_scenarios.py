"""The scenarios bench/e2e.py runs: what to queue, how the receiver answers, which drain flags
to use. Each scenario's purpose is in docs/benchmarks.md; `--scale` shrinks the row counts for the
smoke test."""
import random

UNLIMITED = 1_000_000.0


class Subscriber:
    def __init__(self, sid, rate=UNLIMITED, burst=UNLIMITED, behaviour=None, group="main"):
        self.id, self.rate, self.burst = sid, rate, burst
        self.behaviour, self.group = behaviour, group


class Scenario:
    """What to queue, how the sink answers, and which drain flags to use."""

    def __init__(self, name, title, subscribers, rows_for, tls=False, delay_ms=0, wrk=False,
                 drain_args=(), stop_when_done=None, due_offsets=None, seed_loop=False,
                 receiver="sink", wrk_connections=None, drains=1, queue="sqlite",
                 rate_group=None, shape="seed000"):
        self.name, self.title, self.subscribers = name, title, subscribers
        self.rows_for = rows_for            # subscriber -> rows to queue
        self.tls, self.delay_ms, self.wrk = tls, delay_ms, wrk
        self.drain_args = list(drain_args)
        self.stop_when_done = stop_when_done  # a group: SIGTERM once its rows are all done
        self.due_offsets = due_offsets      # subscriber -> [seconds after start] (future rows)
        self.seed_loop = seed_loop          # drained by surge_seed_loop instead of surge drain
        self.receiver = receiver            # "sink" (surge sink) or "nginx"
        self.wrk_connections = wrk_connections  # None: --wrk-connections
        self.drains = drains                # `surge drain` processes on the one queue file
        self.queue = queue                  # "sqlite" (a file) or "postgres" (a database)
        # A group whose rate is the scenario's (ratio to wrk); the drainer's CPU is also read
        # when that group's rows are all done.
        self.rate_group = rate_group
        self.shape = shape                  # the queue's published shape: seed000 or seed001


def build_scenarios(scale, half_rate):
    def n(full, least=1):
        return max(least, int(full * scale))
    rng = random.Random(7)
    scenarios = {}
    unthrottled = [Subscriber(i) for i in range(1, 101)]
    per_sub = n(200_000, 200) // 100
    scenarios["a_http"] = Scenario("a_http", "(a) 100 unthrottled subscribers, HTTP", unthrottled,
                                   lambda s: per_sub, wrk=True)
    # The reference: nginx costs little per request, so the drainer's cost shows.
    scenarios["nginx_http"] = Scenario(
        "nginx_http", "nginx: 100 unthrottled subscribers, HTTP, defaults", unthrottled,
        lambda s: per_sub, wrk=True, receiver="nginx", wrk_connections=200)
    scenarios["nginx_https"] = Scenario(
        "nginx_https", "nginx: 100 unthrottled subscribers, HTTPS (P-256), defaults", unthrottled,
        lambda s: per_sub, tls=True, wrk=True, receiver="nginx", wrk_connections=200)
    # The same rows on seed001's shape: stored payload bytes and signatures, whole seconds.
    scenarios["nginx_http_seed001"] = Scenario(
        "nginx_http_seed001", "nginx: as nginx_http, on the seed001 queue shape", unthrottled,
        lambda s: per_sub, wrk=True, receiver="nginx", wrk_connections=200, shape="seed001")
    # nginx_http with every third subscriber limited to 50/s (burst 10), so throttled rows sit
    # among the due ones all through the table. The throttled get ~10 s of rows at their rate
    # (500 at full size, not 2,000, which would take 40 s); the unthrottled keep nginx_http's
    # 2,000 each, and their rate is the one set against wrk's.
    third = [Subscriber(i, rate=50.0, burst=10, group="throttled") if i % 3 == 0
             else Subscriber(i, group="unthrottled") for i in range(1, 101)]
    scenarios["nginx_throttled_third"] = Scenario(
        "nginx_throttled_third",
        "nginx: as nginx_http, a third of the subscribers at 50/s (burst 10) with 10 s of rows",
        third, lambda s: per_sub if s.rate == UNLIMITED else int(s.rate * max(2.0, 10 * scale)),
        wrk=True, receiver="nginx", wrk_connections=200, rate_group="unthrottled")
    # Several drains on one queue: ownership leases spread the subscribers.
    for drains in (2, 3):
        scenarios[f"nginx_http_x{drains}"] = Scenario(
            f"nginx_http_x{drains}", f"nginx: as nginx_http, {drains} drain processes", unthrottled,
            lambda s: per_sub, receiver="nginx", drains=drains)
    scenarios["a_https"] = Scenario("a_https", "(a) 100 unthrottled subscribers, HTTPS",
                                    unthrottled, lambda s: per_sub, tls=True, wrk=True)
    # The same with the process capped at 256 requests in flight: the defaults keep 100 x 16
    # connections open to the one loopback origin, which costs CPU on both sides (docs).
    capped = ["--max-in-flight", "256"]
    scenarios["a_http_256"] = Scenario("a_http_256", "(a) HTTP, --max-in-flight 256",
                                       unthrottled, lambda s: per_sub, wrk=True, drain_args=capped)
    scenarios["a_https_256"] = Scenario("a_https_256", "(a) HTTPS, --max-in-flight 256",
                                        unthrottled, lambda s: per_sub, tls=True, wrk=True,
                                        drain_args=capped)
    # The adaptive per-origin limit (on by default) finds that concurrency from latency; these
    # turn it off, for the comparison.
    no_limit = ["--origin-latency-tolerance", "0"]
    scenarios["a_http_no_origin_limit"] = Scenario(
        "a_http_no_origin_limit", "(a) HTTP, --origin-latency-tolerance 0", unthrottled,
        lambda s: per_sub, wrk=True, drain_args=no_limit)
    scenarios["a_https_no_origin_limit"] = Scenario(
        "a_https_no_origin_limit", "(a) HTTPS, --origin-latency-tolerance 0", unthrottled,
        lambda s: per_sub, tls=True, wrk=True, drain_args=no_limit)
    # Added latency at half of (a)'s rate: the same 100 subscribers, each limited to 1/200 of it.
    paced = [Subscriber(i, rate=half_rate / 100, burst=1) for i in range(1, 101)]
    scenarios["half_rate"] = Scenario(
        "half_rate", "100 subscribers paced to half of (a)'s rate", paced,
        lambda s: max(5, int(s.rate * max(2.0, 15 * scale))))
    many = [Subscriber(i) for i in range(1, n(10_000, 100) + 1)]
    scenarios["b"] = Scenario("b", "(b) 10,000 subscribers answering in 200 ms", many,
                              lambda s: n(1_000_000, 10_000) // len(many), delay_ms=200,
                              drain_args=["--max-in-flight", "5120"])
    limited = [Subscriber(i, rate=float(rng.randint(5, 50)), burst=5)
               for i in range(1, n(10_000, 100) + 1)]
    scenarios["c"] = Scenario("c", "(c) 10,000 subscribers limited to 5-50/s", limited,
                              lambda s: max(10, int(20 * min(1.0, scale * 20))))
    fits = [Subscriber(i, rate=float(rng.randint(5, 50)), burst=5) for i in range(1, 201)]
    scenarios["c_fit"] = Scenario("c_fit", "(c') 200 subscribers limited to 5-50/s", fits,
                                  lambda s: max(10, int(s.rate * max(2.0, 20 * scale))))
    # The limits judged across drains: three processes share the subscribers (and hand them
    # over as they start and stop), and the window check counts every attempt of all three.
    scenarios["c_fit_x3"] = Scenario("c_fit_x3", "(c') with 3 drain processes", fits,
                                     lambda s: max(10, int(s.rate * max(2.0, 20 * scale))),
                                     drains=3)
    # The same queues on PostgreSQL (a database each on a throw-away server, fsync on): the
    # reference receiver with 1 to 3 drains, and the limits judged across three drains.
    scenarios["pg_nginx_http"] = Scenario(
        "pg_nginx_http", "nginx: as nginx_http, queue on PostgreSQL", unthrottled,
        lambda s: per_sub, wrk=True, receiver="nginx", wrk_connections=200, queue="postgres")
    for drains in (2, 3):
        scenarios[f"pg_nginx_http_x{drains}"] = Scenario(
            f"pg_nginx_http_x{drains}",
            f"nginx: as nginx_http, queue on PostgreSQL, {drains} drain processes", unthrottled,
            lambda s: per_sub, receiver="nginx", drains=drains, queue="postgres")
    scenarios["pg_c_fit_x3"] = Scenario(
        "pg_c_fit_x3", "(c') with 3 drain processes, queue on PostgreSQL", fits,
        lambda s: max(10, int(s.rate * max(2.0, 20 * scale))), drains=3, queue="postgres")
    small_count = n(1_000, 50)
    spread = max(2.0, 15.0 * scale)
    mixed = [Subscriber(1, group="backlog")] + [Subscriber(i, group="small")
                                                for i in range(2, small_count + 2)]
    offsets = {s.id: sorted(rng.uniform(0, spread) for _ in range(5)) for s in mixed[1:]}
    scenarios["d"] = Scenario("d", "(d) a 200,000-row backlog beside 1,000 small subscribers",
                              mixed, lambda s: n(200_000, 1_000) if s.id == 1 else 5,
                              due_offsets=offsets, drain_args=["--until-drained-wait", "60"])
    # (e): 30 % failing (500), hanging, or answering 429; the healthy 70 % are timed until done.
    def faulty(i):
        if i <= 70:
            return Subscriber(i, group="healthy")
        behaviour = ({"status": 500} if i <= 80 else {"hang": True} if i <= 90
                     else {"status": 429})
        return Subscriber(i, behaviour=behaviour, group="faulty")
    rows_e = n(200_000, 2_000) // 100
    # The naive loop on (a)'s and (b)'s endpoints, at sizes it finishes in seconds.
    scenarios["seed_a"] = Scenario("seed_a", "seed loop: 100 subscribers, sink answers at once",
                                   unthrottled, lambda s: n(50_000, 100) // 100, seed_loop=True)
    # The same loop against the reference receiver, which costs little per request: the
    # figure that nginx_http's rate is compared with for the target "10 x the seed loop".
    scenarios["seed_nginx"] = Scenario("seed_nginx", "seed loop: 100 subscribers, nginx",
                                       unthrottled, lambda s: n(50_000, 100) // 100,
                                       receiver="nginx", seed_loop=True)
    scenarios["seed_b"] = Scenario("seed_b", "seed loop: 100 subscribers answering in 200 ms",
                                   unthrottled, lambda s: 1 if s.id <= n(50, 10) else 0,
                                   delay_ms=200, seed_loop=True)
    fault_args = ["--attempt-timeout", "2", "--grace", "1"]
    scenarios["e_healthy"] = Scenario(
        "e_healthy", "(e) baseline: the same 100 subscribers, all healthy",
        [Subscriber(i, group="healthy" if i <= 70 else "others") for i in range(1, 101)],
        lambda s: rows_e, drain_args=fault_args)
    scenarios["e"] = Scenario("e", "(e) 30 % failing, hanging or answering 429",
                              [faulty(i) for i in range(1, 101)], lambda s: rows_e,
                              drain_args=fault_args, stop_when_done="healthy")
    return scenarios
