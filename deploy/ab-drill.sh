#!/bin/sh
# The A/B gate's drill on the embedded simulator (docs/statistics.md): 10 gates of the default
# profile with the noise of the statistics tests (5% run CV, 10% step CV) and short trials
# (workload.repeats = 3), seeds 1..10, first of the unchanged configuration, then of a
# candidate 10% slower (sim.slowdown = 1.10). Prints one line per gate and the counts.
#
#   sh deploy/ab-drill.sh            # from the repository root
#
# Environment: BIN (the xtask binary; default: built here), OUT (default target/ab-drill),
# SEEDS (default "1 2 3 4 5 6 7 8 9 10"), CASES (default "unchanged slower").
set -u
if [ -z "${BIN:-}" ]; then
    cargo build -q -p xtask || exit 2
    BIN=target/debug/xtask
fi
OUT=${OUT:-target/ab-drill}
SEEDS=${SEEDS:-"1 2 3 4 5 6 7 8 9 10"}
CASES=${CASES:-"unchanged slower"}
mkdir -p "$OUT"
for CASE in $CASES; do
    pass=0; fail=0; undecided=0
    for S in $SEEDS; do
        DIR="$OUT/$CASE-$S"
        rm -rf "$DIR"
        EXTRA=""
        [ "$CASE" = slower ] && EXTRA="--candidate-set sim.slowdown=1.10"
        START=$(date +%s)
        # shellcheck disable=SC2086
        "$BIN" bench ab HEAD --out "$DIR" --seed "$S" --no-history \
            --set sim.noise.run_cv=0.05 --set sim.noise.step_cv=0.1 --set "sim.noise.seed=$S" \
            --set workload.repeats=3 $EXTRA >"$DIR.log" 2>&1
        CODE=$?
        SECS=$(( $(date +%s) - START ))
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
