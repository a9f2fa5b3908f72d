#!/bin/sh
# The A/B gate on a real engine (docs/statistics.md, "On llama.cpp"): llama.cpp's llama-server
# on CPU serving Gemma 3 270M, one server per arm, profile `llama-cpp` (4 clients, 32 and 64
# prompt tokens) with 16 output tokens and trials of 4 requests, configs/engine-llamacpp.toml
# with 4 slots in both arms.
#   - unchanged, 5 gates (seeds 1..5) with a CPU-bound process (nice 19) beside the job;
#   - a candidate with 3 slots instead of 4 (one of the 4 clients queues: about 1.3x the mean
#     end-to-end latency), 5 gates.
# Prints one line per gate and the counts.
#
#   LLAMA_SERVER=/path/to/llama-server sh deploy/ab-llama.sh    # from the repository root
#
# Environment: BIN (the xtask binary; default: built here), OUT (default target/ab-llama),
# GGUF (default: the cached model of `cargo xtask engine model`), SEEDS (default "1 2 3 4 5"),
# CASES (default "unchanged slower"), MAX_REQUESTS (the measurement budget; default the gate's).
set -u
if [ -z "${BIN:-}" ]; then
    cargo build -q -p xtask || exit 2
    BIN=target/debug/xtask
fi
OUT=${OUT:-target/ab-llama}
SEEDS=${SEEDS:-"1 2 3 4 5"}
CASES=${CASES:-"unchanged slower"}
MODEL=""
[ -n "${GGUF:-}" ] && MODEL="--gguf $GGUF"
mkdir -p "$OUT"
for CASE in $CASES; do
    pass=0; fail=0; undecided=0
    for S in $SEEDS; do
        DIR="$OUT/$CASE-$S"
        rm -rf "$DIR"
        EXTRA=""
        HOG=""
        if [ "$CASE" = slower ]; then
            EXTRA="--candidate-set scheduler.max_num_seqs=3"
        else
            # A CPU-bound process beside the job for its whole length, at the lowest priority:
            # at normal priority it starves llama.cpp's threads on a 2-core host (prefills of 64
            # tokens take seconds), which measures the host's collapse, not the gate.
            nice -n 19 sh -c 'while :; do :; done' &
            HOG=$!
        fi
        START=$(date +%s)
        # shellcheck disable=SC2086
        "$BIN" bench ab HEAD --engine llama-cpp $MODEL --profile llama-cpp \
            --out "$DIR" --seed "$S" --no-history --set scheduler.max_num_seqs=4 \
            --trial-requests 4 --set workload.max_tokens=16 ${MAX_REQUESTS:+--max-requests $MAX_REQUESTS} \
            $EXTRA >"$DIR.log" 2>&1
        CODE=$?
        SECS=$(( $(date +%s) - START ))
        [ -n "$HOG" ] && kill "$HOG"
        case $CODE in
            0) pass=$((pass + 1)); V=pass ;;
            1) fail=$((fail + 1)); V=fail ;;
            3) undecided=$((undecided + 1)); V=inconclusive ;;
            *) echo "$CASE seed $S: exit $CODE, see $DIR.log"; exit 2 ;;
        esac
        TRIALS=$(grep -c '"dir": "[0-9]' "$DIR/ab.json")
        echo "$CASE seed $S: $V (exit $CODE), $TRIALS trials, ${SECS} s"
    done
    echo "$CASE: pass $pass, fail $fail, inconclusive $undecided"
done
