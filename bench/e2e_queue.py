"""The queue bench/e2e.py and bench/storage_io.py fill and read: a SQLite file or a PostgreSQL
database (through bench/pg_queue.py's psql), with the subscribers and rows a scenario asks for,
interleaved as a producer's fan-out writes them (or, as a labelled variant, contiguous). The
file holds either published shape (docs/queue-shapes.md): seed000's tables, or seed001's, filled
with what seed001's producer stores (the payload's bytes and their signature, whole seconds)."""
import hashlib
import hmac
import sqlite3
import time
from collections import namedtuple

import pg_queue

BODY = ('{"type":"video.trending","video_id":"v_8f3k2j9d","channel_id":"c_19283",'
        '"title":"A clip that went viral overnight","score":98.7,"velocity":1523.4,"rank":3,'
        '"region":"EU","tags":["music","live","trending"],'
        '"thumbnail":"https://cdn.example.com/t/v_8f3k2j9d.jpg",'
        '"observed_at":"2026-11-21T06:00:00Z"}')


# Where each shape keeps what the bench reads: the tables, the URL column, the time a row was
# queued, the rows still to send and the rows delivered.
Shape = namedtuple("Shape", "deliveries subscribers url queued_at open_rows done_rows")
SHAPES = {
    "seed000": Shape("webhook_delivery", "webhook_subscriber", "url", "created_at",
                     "status IN ('pending','retry')", "status = 'done'"),
    "seed001": Shape("webhook_deliveries", "webhook_subscribers", "endpoint", "enqueued_at",
                     "state = 'pending'", "state = 'delivered'"),
}

# seed001's own DDL (docs/queue-shapes.md): its producer creates the file; `surge migrate` then
# adds only Surge's tables.
SEED001_DDL = """
CREATE TABLE webhook_subscribers (id INTEGER PRIMARY KEY, endpoint TEXT NOT NULL, secret TEXT NOT NULL,
  events TEXT NOT NULL, rate_per_min INTEGER NOT NULL DEFAULT 60,
  burst INTEGER NOT NULL DEFAULT 20, region TEXT NOT NULL,
  active INTEGER NOT NULL DEFAULT 1);
CREATE TABLE webhook_deliveries (id INTEGER PRIMARY KEY, subscriber_id INTEGER NOT NULL REFERENCES webhook_subscribers(id),
  event_type TEXT NOT NULL, payload BLOB NOT NULL, signature TEXT NOT NULL, enqueued_at INTEGER NOT NULL,
  attempt INTEGER NOT NULL DEFAULT 0, next_attempt INTEGER NOT NULL, leased_until INTEGER NOT NULL DEFAULT 0,
  state TEXT NOT NULL DEFAULT 'pending');
CREATE INDEX idx_deliveries_due ON webhook_deliveries (state, next_attempt) WHERE state = 'pending';
CREATE TABLE webhook_buckets (subscriber_id INTEGER PRIMARY KEY REFERENCES webhook_subscribers(id),
  tokens REAL NOT NULL, updated_at REAL NOT NULL);
"""


def create_shape(db, shape):
    """What exists before `surge migrate`: nothing for seed000 (migrate creates its tables), the
    producer's own tables for seed001."""
    if shape == "seed000":
        return
    if is_postgres(db):
        raise ValueError("the seed001 shape is a SQLite file (docs/queue-shapes.md)")
    connection = sqlite3.connect(db)
    connection.executescript(SEED001_DDL)
    connection.close()


def stored_signature(secret, payload):
    """What seed001's producer stores at enqueue: lowercase hex HMAC-SHA256 of the bytes."""
    return hmac.new(secret.encode(), payload, hashlib.sha256).hexdigest()


def is_postgres(db):
    """Whether `db` (what `surge --db` gets) is a PostgreSQL URI rather than a SQLite file."""
    return db.startswith(("postgresql://", "postgres://"))


def subscriber_rows(scenario, url_base):
    return [(s.id, f"{url_base}/hook/{s.id}", f"bench-secret-{s.id:08d}", s.rate,
             int(min(s.burst, 2**31 - 1)), float(min(s.burst, 2**31 - 1)))
            for s in scenario.subscribers]


LAYOUTS = ("interleaved", "contiguous")


def delivery_rows(scenario, start_estimate, now, layout="interleaved"):
    """(subscriber_id, payload, next_attempt_at, created_at) of every row to queue, in id order.

    interleaved (as a producer writes them): event by event, one row per subscriber, the rows of
    one event consecutive; a subscriber with fewer rows drops out of the later events, and rows
    with due offsets keep their due times but take their place by event index. contiguous: all
    of one subscriber's rows, then the next one's (the layout of the older figures)."""
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}")
    queues = []  # (subscriber id, the due time of each of its rows)
    for sub in scenario.subscribers:
        if scenario.due_offsets and sub.id in scenario.due_offsets:
            dues = [start_estimate + offset for offset in scenario.due_offsets[sub.id]]
        else:
            dues = [now] * scenario.rows_for(sub)
        if dues:
            queues.append((sub.id, dues))
    if layout == "contiguous":
        order = ((sid, due) for sid, dues in queues for due in dues)
    else:
        order = _by_event(queues)
    for sid, due in order:
        # created_at = the time the row became due, so lag is started_at - created_at.
        yield (sid, BODY, due, due)


def _by_event(queues):
    event = 0
    while queues:
        for sid, dues in queues:
            yield sid, dues[event]
        event += 1
        queues = [(sid, dues) for sid, dues in queues if len(dues) > event]


def populate(db, scenario, url_base, start_estimate, layout="interleaved", shape="seed000"):
    """Subscribers and rows straight into the queue (10,000 `subscriber add` calls would take
    minutes), the rows in delivery_rows' `layout`; the columns are the shared DDL's plus Surge's
    migrated ones."""
    if is_postgres(db):
        return populate_postgres(db, scenario, url_base, start_estimate, layout)
    if shape == "seed001":
        return populate_seed001(db, scenario, url_base, start_estimate, layout)
    connection = sqlite3.connect(db)
    with connection:
        connection.executemany(
            "INSERT INTO webhook_subscriber (id, url, secret, event_types, rate_per_sec, burst,"
            " tokens, tokens_updated_at, active) VALUES (?, ?, ?, '*', ?, ?, ?, 0, 1)",
            subscriber_rows(scenario, url_base))
    now = time.time()
    rows = 0

    def generate():
        nonlocal rows
        for row in delivery_rows(scenario, start_estimate, now, layout):
            rows += 1
            yield row
    with connection:
        connection.executemany(
            "INSERT INTO webhook_delivery (subscriber_id, event_type, payload, next_attempt_at,"
            " created_at) VALUES (?, 'video.trending', ?, ?, ?)", generate())
    connection.close()
    return rows


def populate_seed001(db, scenario, url_base, start_estimate, layout):
    """populate() on seed001's columns: a per-minute rate, the events as a JSON array, the
    payload's bytes and their stored signature, whole-second times."""
    connection = sqlite3.connect(db)
    secrets = {}
    with connection:
        rows = []
        for sid, url, secret, rate, burst, _ in subscriber_rows(scenario, url_base):
            secrets[sid] = secret
            rows.append((sid, url, secret, int(min(rate * 60, 2**62)), burst))
        connection.executemany(
            "INSERT INTO webhook_subscribers (id, endpoint, secret, events, rate_per_min, burst,"
            " region) VALUES (?, ?, ?, '[\"*\"]', ?, ?, 'DE')", rows)
    payload = BODY.encode()
    signatures = {sid: stored_signature(secret, payload) for sid, secret in secrets.items()}
    count = 0

    def generate():
        nonlocal count
        for sid, _, due, created in delivery_rows(scenario, start_estimate, time.time(), layout):
            count += 1
            yield (sid, payload, signatures[sid], int(created), int(due))
    with connection:
        connection.executemany(
            "INSERT INTO webhook_deliveries (subscriber_id, event_type, payload, signature,"
            " enqueued_at, next_attempt) VALUES (?, 'video.trending', ?, ?, ?, ?)", generate())
    connection.close()
    return count


def populate_postgres(db, scenario, url_base, start_estimate, layout="interleaved"):
    """populate() through psql's \\copy: the subscribers with their ids (the identity's sequence
    is moved past them, as a producer's INSERT without an id would need), then the rows."""
    pg_queue.copy_in(db, "webhook_subscriber",
                     ["id", "url", "secret", "event_types", "rate_per_sec", "burst", "tokens",
                      "tokens_updated_at", "active"],
                     ((sid, url, secret, "*", rate, burst, tokens, 0, 1)
                      for sid, url, secret, rate, burst, tokens in
                      subscriber_rows(scenario, url_base)))
    pg_queue.execute(db, "SELECT setval(pg_get_serial_sequence('webhook_subscriber', 'id'),"
                         " max(id)) FROM webhook_subscriber")
    return pg_queue.copy_in(db, "webhook_delivery",
                            ["subscriber_id", "event_type", "payload", "next_attempt_at",
                             "created_at"],
                            ((sid, "video.trending", payload, due, created)
                             for sid, payload, due, created in
                             delivery_rows(scenario, start_estimate, time.time(), layout)))


def set_urls(db, placeholder, scheme_host, shape="seed000"):
    """The subscribers' URLs from the placeholder to the receiver's address."""
    if shape != "seed000":
        connection = sqlite3.connect(db)
        with connection:
            table, column = SHAPES[shape].subscribers, SHAPES[shape].url
            connection.execute(f"UPDATE {table} SET {column} = replace({column}, ?, ?)",
                               (placeholder, scheme_host))
        connection.close()
        return
    if is_postgres(db):
        pg_queue.execute(db, f"UPDATE webhook_subscriber SET url = replace(url,"
                             f" {pg_queue.literal(placeholder)}, {pg_queue.literal(scheme_host)})")
        return
    connection = sqlite3.connect(db)
    with connection:
        connection.execute("UPDATE webhook_subscriber SET url = replace(url, ?, ?)",
                           (placeholder, scheme_host))
    connection.close()


def outstanding(db, ids, shape="seed000"):
    if shape != "seed000":
        return _count(db, f"SELECT count(*) FROM {SHAPES[shape].deliveries} WHERE NOT"
                          f" ({SHAPES[shape].done_rows}) AND subscriber_id IN"
                          f" ({','.join(str(int(i)) for i in ids)})")
    if is_postgres(db):
        return int(pg_queue.query(
            db, "SELECT count(*) FROM webhook_delivery WHERE status != 'done' AND subscriber_id"
                f" IN ({','.join(str(int(i)) for i in ids)})")[0][0])
    connection = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        marks = ",".join("?" * len(ids))
        return connection.execute(
            f"SELECT count(*) FROM webhook_delivery WHERE status != 'done' AND subscriber_id IN"
            f" ({marks})", ids).fetchone()[0]
    finally:
        connection.close()


def any_due(db, ids, shape="seed000"):
    """Whether any row of these subscribers is still pending or retrying: through the partial
    index on (subscriber_id, next_attempt_at) for due rows, a probe per subscriber, so it can be
    asked every 0.2 s of a measured drain (outstanding()'s count reads the whole table)."""
    sql = (f"SELECT EXISTS (SELECT 1 FROM {SHAPES[shape].deliveries} WHERE"
           f" {SHAPES[shape].open_rows}"
           f" AND subscriber_id IN ({','.join(str(int(i)) for i in ids)}))")
    if is_postgres(db):
        return pg_queue.query(db, sql)[0][0] == "t"
    connection = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        return bool(connection.execute(sql).fetchone()[0])
    finally:
        connection.close()


def _count(db, sql):
    connection = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        return connection.execute(sql).fetchone()[0]
    finally:
        connection.close()
