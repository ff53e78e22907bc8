#!/usr/bin/env python3
"""A partner's receiver built from the Python examples in docs/subscribers.md, run verbatim:
Python's own http.server, the docs' verify_vvv / verify_standard / events_of. Tests point
`surge drain` at it, so the docs and Surge's batches are checked by code Surge did not write.

    doc_receiver.py DOCS.md SECRETS.json PORT_FILE RESULT.json

SECRETS.json maps the last path segment (a subscriber id) to [scheme, secret]. Each verified
request's events are stored per delivery id (a repeat counts as a duplicate, as the docs say to
deduplicate) and answered 204; a request that fails verification gets 401. On SIGTERM the
counts go to RESULT.json.
"""
import json
import re
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

docs, secrets_path, port_file, result_path = sys.argv[1:5]
namespace = {}
for block in re.findall(r"```python\n(.*?)```", open(docs, encoding="utf-8").read(), re.S):
    exec(block, namespace)  # the documented examples, unchanged
secrets = json.load(open(secrets_path))
lock = threading.Lock()
result = {"requests": 0, "rejected": 0, "batches": 0, "events": {}, "duplicates": 0}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        scheme, secret = secrets[self.path.rsplit("/", 1)[-1]]
        verify = namespace["verify_vvv" if scheme == "vvv" else "verify_standard"]
        with lock:
            result["requests"] += 1
            if not verify(secret, self.headers, body):
                result["rejected"] += 1
                status = 401
            else:
                status = 204
                result["batches"] += "X-VVV-Batch-Size" in self.headers
                for delivery_id, _event in namespace["events_of"](self.headers, body):
                    seen = result["events"].get(delivery_id, 0)
                    result["duplicates"] += seen > 0
                    result["events"][delivery_id] = seen + 1
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True


def finish(*_):
    with lock:
        json.dump(result, open(result_path, "w"))
    threading.Thread(target=server.shutdown).start()


signal.signal(signal.SIGTERM, finish)
with open(port_file + ".tmp", "w") as out:
    out.write(str(server.server_address[1]))
import os  # noqa: E402  (after the examples, which must not depend on it)
os.replace(port_file + ".tmp", port_file)
server.serve_forever()
