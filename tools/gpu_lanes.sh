#!/usr/bin/env bash
# Parallel test lanes and diagnostic scripts on the GPU machine, one call of the device tool.
#
#   OUT=$OUT bash tools/gpu_lanes.sh PLAN_FILE
#
# PLAN_FILE has one lane a line: ``NAME SECONDS MODE ARGS...`` where MODE is
#   c   pytest ARGS on the compiled call path (built in place first, once)
#   p   pytest ARGS on the pure-Python path (NVMATH_PURE_PYTHON=1)
#   s   a shell command ARGS (``PYTHONPATH=.`` set), e.g. a diagnostic script
# Lines starting with ``#`` and blank lines are skipped. Lanes whose names start with the same letter
# run one after another; lanes of different letters run side by side (the machine has 16 cores and one
# GPU: keep at most ~5 letters). Each lane runs under ``timeout SECONDS`` and ``-X faulthandler``.
#
# Writes $OUT/summary.txt (each lane's last pytest summary line, or its exit status, appended as the
# lane ends) and $OUT/logs.tgz (every lane's whole log; until it is written, each ended lane's log tail
# is $OUT/tail-NAME.txt): the device tool returns at most 8 files.
set -uo pipefail
OUT=${OUT:-/tmp/nvmath-gpu-out}
PLAN=${1:?usage: gpu_lanes.sh PLAN_FILE}
LOGS=$(mktemp -d)/logs
mkdir -p "$LOGS" "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH}

python3 setup.py build_ext --inplace >"$LOGS/build.log" 2>&1 || python3 tools/build_fastcall.py >>"$LOGS/build.log" 2>&1
echo "build: $(tail -1 "$LOGS/build.log")" >"$OUT/summary.txt"

run_lane() {  # NAME SECONDS MODE ARGS...
    local name=$1 secs=$2 mode=$3 rc start
    shift 3
    start=$(date +%s)
    case $mode in
        c) timeout -k 10 "$secs" python3 -X faulthandler -m pytest -q -p no:cacheprovider "$@" ;;
        p) NVMATH_PURE_PYTHON=1 timeout -k 10 "$secs" python3 -X faulthandler -m pytest -q -p no:cacheprovider "$@" ;;
        s) timeout -k 10 "$secs" bash -c "$*" ;;
        *) echo "unknown mode $mode"; false ;;
    esac >"$LOGS/$name.log" 2>&1
    rc=$?
    local line
    line=$(grep -E "(passed|failed|error|no tests ran)" "$LOGS/$name.log" | grep -E " in [0-9.]+s" | tail -1)
    # (appended at once: a call cut short at its time limit still returns the lanes that ended)
    echo "$name rc=$rc $(( $(date +%s) - start ))s ${line:-$(tail -1 "$LOGS/$name.log")}" >>"$OUT/summary.txt"
    tail -c 20000 "$LOGS/$name.log" >"$OUT/tail-$name.txt" 2>/dev/null
}

run_group() {  # every plan line of one leading letter, in order
    local letter=$1
    grep -vE '^\s*(#|$)' "$PLAN" | while read -r name secs mode rest; do
        [[ ${name:0:1} == "$letter" ]] || continue
        # shellcheck disable=SC2086
        eval run_lane "$name" "$secs" "$mode" $rest
    done
}

letters=$(grep -vE '^\s*(#|$)' "$PLAN" | cut -c1 | sort -u)
for l in $letters; do run_group "$l" & done
wait
cat "$OUT/summary.txt"
tar -czf "$OUT/logs.tgz" -C "$(dirname "$LOGS")" logs && rm -f "$OUT"/tail-*.txt
