#!/usr/bin/env bash
# End-to-end drain benchmark on one machine (DESIGN section 7): queue ROWS deliveries for
# SUBSCRIBERS unthrottled subscribers, all pointing at one local `surge sink`, drain them with
# `surge drain --until-drained`, and compare the drain rate with wrk POSTing the same body to the
# same sink (the ceiling), measured in the same run: wrk before and after the drain, mean used.
# All traffic goes to 127.0.0.1. Prints one JSON object on stdout; progress goes to stderr.
#
#   bench/e2e_drain.sh [path/to/surge]
#   ROWS=200000 SUBSCRIBERS=100 SINK_THREADS=1 WRK_SECONDS=10 CONNECTIONS=64 bench/e2e_drain.sh
#   DRAIN_ARGS='--threads 2 --per-subscriber-in-flight 16' bench/e2e_drain.sh
set -euo pipefail

SURGE=$(realpath "${1:-build/release/tools/surge}")
ROWS=${ROWS:-200000}
SUBSCRIBERS=${SUBSCRIBERS:-100}
SINK_THREADS=${SINK_THREADS:-1}
WRK_SECONDS=${WRK_SECONDS:-10}
CONNECTIONS=${CONNECTIONS:-64}
DRAIN_ARGS=${DRAIN_ARGS:-}   # extra `surge drain` flags, e.g. --per-subscriber-in-flight 32

[[ -x $SURGE ]] || { echo "no surge binary at $SURGE (build the release preset first)" >&2; exit 1; }
command -v wrk >/dev/null || { echo "wrk is required (apt-get install wrk)" >&2; exit 1; }
[[ -x /usr/bin/time ]] || { echo "/usr/bin/time is required (apt-get install time)" >&2; exit 1; }

DIR=$(mktemp -d)
SINK_PID=
cleanup() {
  if [[ -n $SINK_PID ]]; then kill "$SINK_PID" 2>/dev/null || true; wait "$SINK_PID" 2>/dev/null || true; fi
  rm -rf "$DIR"
}
trap cleanup EXIT
cd "$DIR"
log() { echo "e2e_drain: $*" >&2; }

# A ~300-byte event, the same bytes for the drain and for wrk.
BODY='{"type":"video.trending","video_id":"v_8f3k2j9d","channel_id":"c_19283","title":"A clip that went viral overnight","score":98.7,"velocity":1523.4,"rank":3,"region":"EU","tags":["music","live","trending"],"thumbnail":"https://cdn.example.com/t/v_8f3k2j9d.jpg","observed_at":"2026-11-21T06:00:00Z"}'

"$SURGE" migrate --db q.db >/dev/null
"$SURGE" sink --listen 127.0.0.1:0 --db q.db --port-file port --threads "$SINK_THREADS" \
  >sink.log 2>&1 &
SINK_PID=$!
for _ in $(seq 100); do [[ -s port ]] && break; sleep 0.1; done
[[ -s port ]] || { log "sink did not start"; cat sink.log >&2; exit 1; }
PORT=$(cat port)

# Ids are 1..N in a fresh database; check anyway, since each URL names its id.
for i in $(seq "$SUBSCRIBERS"); do
  id=$("$SURGE" subscriber add --db q.db --url "http://127.0.0.1:$PORT/hook/$i" \
    --rate 1000000 --burst 1000000 --max-in-flight 0)
  [[ $id == "$i" ]] || { log "expected subscriber id $i, got $id"; exit 1; }
done
"$SURGE" emit --db q.db --type video.trending --data "$BODY" --count $((ROWS / SUBSCRIBERS)) >/dev/null
ROWS=$(( (ROWS / SUBSCRIBERS) * SUBSCRIBERS ))

# wrk: the same body and headers to the same sink. The signature is wrong; the sink still answers
# 200 and does about the same work as for a real delivery (look up the secret, compute the HMAC).
cat >post.lua <<EOF
wrk.method = "POST"
wrk.body = [[$BODY]]
wrk.headers["Content-Type"] = "application/json"
wrk.headers["X-VVV-Event"] = "video.trending"
wrk.headers["X-VVV-Delivery-Id"] = "1"
wrk.headers["X-VVV-Attempt"] = "1"
wrk.headers["X-VVV-Timestamp"] = tostring(os.time())
wrk.headers["X-VVV-Signature"] = "sha256=0000000000000000000000000000000000000000000000000000000000000000"
EOF
run_wrk() {
  wrk -t1 -c"$CONNECTIONS" -d"${WRK_SECONDS}s" -s post.lua "http://127.0.0.1:$PORT/hook/1" >"wrk$1.txt"
  grep -q 'Non-2xx' "wrk$1.txt" && { log "wrk got non-2xx answers"; cat "wrk$1.txt" >&2; exit 1; }
  awk '/^Requests\/sec:/ {print $2}' "wrk$1.txt"
}
log "wrk before the drain (${WRK_SECONDS}s, $CONNECTIONS connections)"
WRK1=$(run_wrk 1)

# The sink's CPU seconds (utime + stime) from /proc, to split the drain's CPU time by process.
sink_cpu() { awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' "/proc/$SINK_PID/stat"; }
SINK_CPU_BEFORE=$(sink_cpu)
log "draining $ROWS rows for $SUBSCRIBERS subscribers ${DRAIN_ARGS:+($DRAIN_ARGS)}"
# shellcheck disable=SC2086  # DRAIN_ARGS is a list of flags
/usr/bin/time -f '%e %U %S %M' -o time.txt \
  "$SURGE" drain --db q.db --until-drained --allow-private-targets --progress-interval 0 \
  $DRAIN_ARGS >drain.log 2>&1
read -r WALL USER_S SYS_S RSS_KB <time.txt
SINK_CPU=$(sink_cpu); SINK_CPU=$(awk -v a="$SINK_CPU_BEFORE" -v b="$SINK_CPU" 'BEGIN {print b - a}')
DELIVERED=$(sed -n 's/.*summary: delivered=\([0-9]*\).*/\1/p' drain.log)
[[ $DELIVERED == "$ROWS" ]] || { log "delivered '$DELIVERED' of $ROWS"; cat drain.log >&2; exit 1; }
"$SURGE" stats --db q.db --json >stats.json
DONE=$(grep -o '"done":[0-9]*' stats.json | head -1 | cut -d: -f2)
[[ $DONE == "$ROWS" ]] || { log "stats says done=$DONE of $ROWS"; cat stats.json >&2; exit 1; }

log "wrk after the drain"
WRK2=$(run_wrk 2)

# Stop the sink; its summary counts the connections it accepted (wrk's 2 x CONNECTIONS included).
kill "$SINK_PID"; wait "$SINK_PID" || true; SINK_PID=
SINK_CONNECTIONS=$(grep -o '"connections":[0-9]*' sink.log | head -1 | cut -d: -f2)

awk -v rows="$ROWS" -v subs="$SUBSCRIBERS" -v wall="$WALL" -v user="$USER_S" -v sys="$SYS_S" \
    -v rss="$RSS_KB" -v w1="$WRK1" -v w2="$WRK2" -v st="$SINK_THREADS" -v c="$CONNECTIONS" \
    -v args="$DRAIN_ARGS" -v sink="$SINK_CPU" -v conns="${SINK_CONNECTIONS:-0}" 'BEGIN {
  rate = rows / wall; wrk = (w1 + w2) / 2
  printf "{\"rows\":%d,\"subscribers\":%d,\"sink_threads\":%d,\"wrk_connections\":%d,", rows, subs, st, c
  printf "\"drain_args\":\"%s\",\"drain_seconds\":%.2f,\"drain_rate\":%.0f,", args, wall, rate
  printf "\"wrk_rate_before\":%.0f,\"wrk_rate_after\":%.0f,\"wrk_rate\":%.0f,\"ratio\":%.3f,", w1, w2, wrk, rate / wrk
  printf "\"drain_cpu_seconds\":%.2f,\"drain_user_seconds\":%.2f,\"drain_sys_seconds\":%.2f,", user + sys, user, sys
  printf "\"sink_cpu_seconds\":%.2f,\"sink_connections\":%d,\"peak_rss_kb\":%d}\n", sink, conns, rss
}'
