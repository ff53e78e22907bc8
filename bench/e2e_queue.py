"""The queue bench/e2e.py and bench/storage_io.py fill and read: a SQLite file or a PostgreSQL
database (through bench/pg_queue.py's psql), with the subscribers and rows a scenario asks for,
interleaved as a producer's fan-out writes them (or, as a labelled variant, contiguous)."""
import sqlite3
import time

import pg_queue

BODY = ('{"type":"video.trending","video_id":"v_8f3k2j9d","channel_id":"c_19283",'
        '"title":"A clip that went viral overnight","score":98.7,"velocity":1523.4,"rank":3,'
        '"region":"EU","tags":["music","live","trending"],'
        '"thumbnail":"https://cdn.example.com/t/v_8f3k2j9d.jpg",'
        '"observed_at":"2026-11-21T06:00:00Z"}')


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


def populate(db, scenario, url_base, start_estimate, layout="interleaved"):
    """Subscribers and rows straight into the queue (10,000 `subscriber add` calls would take
    minutes), the rows in delivery_rows' `layout`; the columns are the shared DDL's plus Surge's
    migrated ones."""
    if is_postgres(db):
        return populate_postgres(db, scenario, url_base, start_estimate, layout)
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


def set_urls(db, placeholder, scheme_host):
    """The subscribers' URLs from the placeholder to the receiver's address."""
    if is_postgres(db):
        pg_queue.execute(db, f"UPDATE webhook_subscriber SET url = replace(url,"
                             f" {pg_queue.literal(placeholder)}, {pg_queue.literal(scheme_host)})")
        return
    connection = sqlite3.connect(db)
    with connection:
        connection.execute("UPDATE webhook_subscriber SET url = replace(url, ?, ?)",
                           (placeholder, scheme_host))
    connection.close()


def outstanding(db, ids):
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


def any_due(db, ids):
    """Whether any row of these subscribers is still pending or retrying: through the partial
    index on (subscriber_id, next_attempt_at) for due rows, a probe per subscriber, so it can be
    asked every 0.2 s of a measured drain (outstanding()'s count reads the whole table)."""
    sql = ("SELECT EXISTS (SELECT 1 FROM webhook_delivery WHERE status IN ('pending','retry')"
           f" AND subscriber_id IN ({','.join(str(int(i)) for i in ids)}))")
    if is_postgres(db):
        return pg_queue.query(db, sql)[0][0] == "t"
    connection = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        return bool(connection.execute(sql).fetchone()[0])
    finally:
        connection.close()
