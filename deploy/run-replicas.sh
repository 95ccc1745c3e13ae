#!/usr/bin/env bash
# N Streamlit replicas of app.py plus haproxy in front of them, all on loopback; Ctrl+C (or SIGTERM) stops them all.
#   bash deploy/run-replicas.sh [N]        # default 2; open http://127.0.0.1:${PROXY_PORT:-8500}/
# Environment: PROXY_PORT (8500), BASE_PORT (8601: replicas on 8601..8600+N), STATS_PORT (8404),
#   LOGDIR (a temp dir: replica-rK.log, haproxy.log, the generated haproxy.cfg), PYTHON (.venv/bin/python).
# Each replica gets ATLAS_REPLICA=rK in its environment (only for logs; the app does not read it).
# A live class spans the replicas: a redis-server on a Unix socket in LOGDIR holds the classes, and every replica
# reads it (ATLAS_CLASS_STORE). Give ATLAS_CLASS_STORE=redis://HOST:PORT/DB to use a Redis of your own instead.
set -euo pipefail
cd "$(dirname "$0")/.."

N="${1:-2}"
PROXY_PORT="${PROXY_PORT:-8500}"
BASE_PORT="${BASE_PORT:-8601}"
STATS_PORT="${STATS_PORT:-8404}"
LOGDIR="${LOGDIR:-$(mktemp -d /tmp/atlas-replicas.XXXXXX)}"
PYTHON="${PYTHON:-.venv/bin/python}"
HAPROXY="${HAPROXY:-$(command -v haproxy || echo /usr/sbin/haproxy)}"
[ -x "$HAPROXY" ] || { echo "haproxy not found: apt-get install haproxy" >&2; exit 1; }
mkdir -p "$LOGDIR"

# One secret for all replicas: Streamlit signs its XSRF cookie with it, so a browser that is redispatched to another
# replica (its own died) is not refused by XSRF protection.
SECRET="${ATLAS_COOKIE_SECRET:-$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')}"

PIDS=()
stop() {
  trap - EXIT INT TERM
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap stop EXIT
trap 'exit 130' INT TERM

if [ -z "${ATLAS_CLASS_STORE:-}" ]; then
  REDIS="${REDIS:-$(command -v redis-server || echo /usr/bin/redis-server)}"
  [ -x "$REDIS" ] || { echo "redis-server not found (a class spans the replicas through it): apt-get install redis-server" >&2; exit 1; }
  # Nothing kept on disk, memory bounded (the classes themselves are bounded: live/rules.py).
  "$REDIS" --port 0 --unixsocket "$LOGDIR/redis.sock" --unixsocketperm 700 --save "" --appendonly no \
    --maxmemory 256mb --maxmemory-policy noeviction --dir "$LOGDIR" >"$LOGDIR/redis.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 100); do [ -S "$LOGDIR/redis.sock" ] && break; sleep 0.1; done
  [ -S "$LOGDIR/redis.sock" ] || { echo "redis-server did not start (see $LOGDIR/redis.log)" >&2; exit 1; }
  export ATLAS_CLASS_STORE="unix://$LOGDIR/redis.sock"
fi

cp deploy/haproxy.cfg "$LOGDIR/haproxy.cfg"
for i in $(seq 1 "$N"); do
  port=$((BASE_PORT + i - 1))
  STREAMLIT_SERVER_COOKIE_SECRET="$SECRET" ATLAS_REPLICA="r$i" OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" nice -n "${NICE:-10}" \
    "$PYTHON" -m atlas app --server.port "$port" --server.address 127.0.0.1 \
    --server.headless true --browser.gatherUsageStats false \
    >"$LOGDIR/replica-r$i.log" 2>&1 &
  PIDS+=($!)
  echo "    server r$i 127.0.0.1:$port check cookie r$i" >>"$LOGDIR/haproxy.cfg"
done

export ATLAS_PROXY_PORT="$PROXY_PORT" ATLAS_STATS_PORT="$STATS_PORT"
"$HAPROXY" -c -q -f "$LOGDIR/haproxy.cfg"
nice -n "${NICE:-10}" "$HAPROXY" -db -f "$LOGDIR/haproxy.cfg" >"$LOGDIR/haproxy.log" 2>&1 &
PIDS+=($!)
echo "atlas: $N replicas on 127.0.0.1:$BASE_PORT.., proxy http://127.0.0.1:$PROXY_PORT/," \
  "stats http://127.0.0.1:$STATS_PORT/stats, classes in $ATLAS_CLASS_STORE, logs in $LOGDIR"
wait -n "${PIDS[@]}" || true   # one of them exiting takes the rest down (trap)
echo "atlas: a replica or the proxy exited; stopping all (see $LOGDIR)" >&2
