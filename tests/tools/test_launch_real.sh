#!/bin/sh
# tacl_comm_init_env() under a real launcher: mpirun (Open MPI) or
# torchrun (from the cached virtual environment tools/torch-venv.sh
# makes).  Skips (77) when the launcher is not installed.
#
# Usage: test_launch_real.sh mpirun|torchrun PATH_TO_ALLREDUCE_EXAMPLE
LAUNCHER=${1:?usage: test_launch_real.sh mpirun|torchrun PROGRAM}
PROG=${2:?usage: test_launch_real.sh mpirun|torchrun PROGRAM}
TMP=$(mktemp -d) || exit 1
trap 'rm -rf "$TMP"' EXIT
. "$(dirname "$0")/../common/checks.sh"

for v in $(env | sed -n 's/^\(TACL_[A-Z_]*\|RANK\|WORLD_SIZE\|MASTER_[A-Z]*\)=.*/\1/p'); do
    unset "$v"
done
export TACL_TIMEOUT=30

case $LAUNCHER in
mpirun)
    if ! command -v mpirun > /dev/null; then
        echo "skipped: mpirun is not installed (apt-get install openmpi-bin)"
        exit 77
    fi
    # Root may run Open MPI only when it says so.
    launch() {
        mpirun --allow-run-as-root --oversubscribe -np "$1" "$PROG"
    }
    ;;
torchrun)
    venv=${TACL_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/tacl/venv}
    if [ ! -x "$venv/bin/torchrun" ]; then
        echo "skipped: no torchrun in the virtual environment $venv" \
             "(tools/torch-venv.sh makes it)"
        exit 77
    fi
    # --no-python runs the C program itself, as torchrun runs any binary.
    launch() {
        "$venv/bin/torchrun" --standalone --nproc-per-node "$1" \
            --no-python "$PROG"
    }
    ;;
*)
    echo "unknown launcher $LAUNCHER"
    exit 2
    ;;
esac

for n in 2 4; do
    launch $n > "$TMP/out" 2>&1
    rc=$?
    expect_rc "$LAUNCHER -n $n" 0 $rc
    good=$(grep -c ": ok$" "$TMP/out")
    checks=$((checks + 1))
    if [ "$good" -eq "$n" ]; then
        ok "$LAUNCHER: $n ranks met and all-reduced"
    else
        fail "$LAUNCHER: $good of $n ranks ok:"
        cat "$TMP/out"
    fi
done
finish
