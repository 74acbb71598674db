#!/usr/bin/env bash
# One batched run on the GPU machine (see ../shared/GPU.md and README "The GPU machine").
#
#   bash tools/gpu_session.sh STEP...        steps run in order; each prints a one-line summary
#
# Steps:
#   selftest            python -m nvmath (report + self-test)
#   tests               the whole suite minus `slow`, one process
#   slow                the `slow` tests
#   callbacks           FFT LTO-callback tests with numpy 2.3.5 first on the path (numba-cuda needs it)
#   bench:SUITE[:ARGS]  python -m benchmarks SUITE ARGS (e.g. bench:matmul, bench:fft:--quick),
#                       nvmath-python included when its wheel travelled in .whl/
#   script:PATH         PYTHONPATH=. python3 PATH (a diagnostic script; its output is in the archive)
#
# Wheels travel in the git-ignored .whl/ folder (name it in the device tool's `carry`):
#   .whl/nvmath_python-1.0.0-cp312-*.whl   the peer, installed into its own directory
#   .whl/np235/numpy-2.3.5-cp312-*.whl     for numba-compiled FFT callbacks
# Fetch them here first (the folder is not kept between sessions):
#   P="--no-deps --only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64"
#   python3 -m pip download $P -d .whl nvmath-python==1.0.0
#   python3 -m pip download $P --platform manylinux_2_27_x86_64 -d .whl/np235 numpy==2.3.5
# Everything lands in one archive, $OUT/gpu-session.tgz (the device tool returns at most 8 files),
# plus $OUT/summary.txt.
set -uo pipefail
OUT=${OUT:-/tmp/nvmath-gpu-out}
WORK=$(mktemp -d)
PEER=/tmp/nvmath-python
NP235=/tmp/np235
export PYTHONUNBUFFERED=1
mkdir -p "$OUT"

install_wheels() {
    if compgen -G ".whl/nvmath_python-*.whl" >/dev/null; then
        python3 -m pip install -q --no-index --no-deps --no-compile --target "$PEER" .whl/nvmath_python-*.whl
    fi
    if compgen -G ".whl/np235/*.whl" >/dev/null; then
        python3 -m pip install -q --no-index --no-deps --no-compile --target "$NP235" .whl/np235/*.whl
    fi
}

summary() { echo "$*" | tee -a "$OUT/summary.txt"; }

run_step() {
    local step=$1 log
    log="$WORK/$(echo "$step" | tr ':/ ' '___').log"
    case $step in
        selftest) PYTHONPATH=. python3 -m nvmath >"$log" 2>&1 ;;
        tests) PYTHONPATH=. python3 -X faulthandler -m pytest tests -q -p no:cacheprovider -m "not slow" >"$log" 2>&1 ;;
        slow) PYTHONPATH=. python3 -X faulthandler -m pytest tests -q -p no:cacheprovider -m slow >"$log" 2>&1 ;;
        callbacks) PYTHONPATH="$NP235:." python3 -m pytest tests/fft tests/compat -q -p no:cacheprovider -k "callback or example" >"$log" 2>&1 ;;
        bench:*)
            local spec=${step#bench:} suite args=()
            suite=${spec%%:*}
            [[ $spec == *:* ]] && read -r -a args <<<"${spec#*:}"
            [[ -d $PEER ]] && args+=(--nvmath-python-path "$PEER")
            # numpy 2.3.5 first (numba-cuda compiles the fused-filter callbacks with it), here and
            # in nvmath-python's child process
            PYTHONPATH="$NP235:." NVMATH_BENCH_CHILD_PATH="$NP235" python3 -m benchmarks "$suite" --plain --out "$WORK/bench" "${args[@]}" >"$log" 2>&1 ;;
        script:*) PYTHONPATH=. python3 "${step#script:}" >"$log" 2>&1 ;;
        *) echo "unknown step: $step" >"$log"; false ;;
    esac
    local rc=$?
    summary "$step rc=$rc: $(grep -E 'passed|failed|Geometric|wrote' "$log" | tail -1)"
    grep -E "^(FAILED|ERROR)|Fatal Python" "$log" | head -10 | tee -a "$OUT/summary.txt"
}

install_wheels
for step in "$@"; do
    run_step "$step"
    tar czf "$OUT/gpu-session.tgz" -C "$WORK" .  # after every step: a run cut short keeps what it did
done
