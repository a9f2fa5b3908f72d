#!/bin/sh
# Client capacity of sharded runs: total requests/s that 1, 2 and 4 local bench processes
# (`bench --shard I/N`, merged with `bench merge`) drive against ONE standalone simulator in
# timing mode at zero delay, 64 tokens per request. Prints one table row per shard count.
# Measure on an idle machine (docs/performance.md):
#
#   sh deploy/capacity.sh            # from the repository root
#
# Environment: CONCURRENCY (whole run, default 64), REQUESTS (whole run, default 8000),
# PORT (simulator, default 8131), BIN (the xtask binary; default: built here in release mode).
set -eu
CONCURRENCY=${CONCURRENCY:-64}
REQUESTS=${REQUESTS:-8000}
PORT=${PORT:-8131}
if [ -z "${BIN:-}" ]; then
    cargo build --release -q -p xtask
    BIN=target/release/xtask
fi
OUT=target/capacity
rm -rf "$OUT"
mkdir -p "$OUT"
"$BIN" sim --port "$PORT" --profile oracle \
    --set sim.timing.ttft_ms=0 --set sim.timing.itl_ms=0 >"$OUT/sim.log" 2>&1 &
SIM=$!
trap 'kill $SIM 2>/dev/null || true' EXIT
sleep 2
printf '| shards (processes) | requests/s (merged window) | requests/s per shard | start spread ms |\n'
printf '|---|---|---|---|\n'
for N in 1 2 4; do
    RUN="capacity-$N"
    AT=$(date -u -d '+3 seconds' +%Y-%m-%dT%H:%M:%SZ)
    i=0
    PIDS=
    while [ "$i" -lt "$N" ]; do
        "$BIN" bench --quiet --base-url "http://127.0.0.1:$PORT" --shard "$i/$N" --run-id "$RUN" \
            --start-at "$AT" --concurrency "$CONCURRENCY" --requests "$REQUESTS" \
            --max-tokens 64 --set load.warmup_requests=0 \
            --out "$OUT/$RUN/shard-$i" >/dev/null &
        PIDS="$PIDS $!"
        i=$((i + 1))
    done
    # shellcheck disable=SC2086
    wait $PIDS
    "$BIN" bench merge --quiet "$OUT/$RUN"/shard-* --out "$OUT/$RUN/merged" >/dev/null
    python3 - "$OUT/$RUN/merged/summary.json" "$N" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
n = int(sys.argv[2])
rps = s["throughput"]["requests_per_s"]
spread = s["extra"]["merge"]["start_spread_ms"]
print(f"| {['one', 'two', 'four'][[1, 2, 4].index(n)]} | {rps:,.0f} | {rps / n:,.0f} | {spread:.1f} |")
PY
done
