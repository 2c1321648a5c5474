# What the training tests of tests/torch share (DeepSpeed, FSDP2, the
# emulated cluster); they source this file after tests/common/checks.sh.
#
# train_setup SRC_ROOT BUILD_ROOT: find (or make) the cached virtual
# environment with tools/torch-venv.sh, build this build's tacl_torch
# (tests/torch/run_torch.sh) and check that it imports; exits 77 with the
# reason when the environment is missing, 1 when the binding fails.  Sets
# PY, TORCHRUN, TRAIN_DIR, PYTHONPATH and TMP (removed on exit).
#
# compare_runs NAME RTOL GLOO_OUT TACL_OUT: one check, that the losses two
# runs printed agree (compare_losses.py: bit for bit, or within RTOL);
# NAMES (default gloo,tacl) labels the two runs.

train_setup() {
    local src=$1 build=$2 venv rc

    venv=$("$src/tools/torch-venv.sh")
    rc=$?
    if [ "$rc" -eq 77 ]; then
        echo "SKIP: no torch environment (tools/torch-venv.sh skipped)"
        exit 77
    elif [ "$rc" -ne 0 ]; then
        echo "FAIL: tools/torch-venv.sh failed (exit $rc)"
        exit 1
    fi
    PY=$venv/bin/python
    TORCHRUN=$venv/bin/torchrun
    TRAIN_DIR=$src/tests/torch
    # run_torch.sh builds this build's binding into its site folder (once
    # per change of its sources), then runs binding_ok.py on one rank.
    if [ ! -x "$src/tests/torch/run_torch.sh" ]; then
        echo "SKIP: tests/torch/run_torch.sh (which builds the binding)" \
            "is missing"
        exit 77
    fi
    mkdir -p "$build/tests/torch" || exit 1
    # Once per binding and library: the check passed for this binding's
    # stamp (run_torch.sh's) and this libtacl (size and time) is not
    # run again by the next test (7 s each on 2 cores).
    local ok_file=$build/tests/torch/binding_ok.stamp ok_key=""
    if "$src/tests/torch/run_torch.sh" "$src" "$build" build \
            > "$build/tests/torch/binding_build.log" 2>&1 &&
            [ -f "$build/tests/torch/site/.stamp" ]; then
        ok_key="$(cat "$build/tests/torch/site/.stamp") $(stat -L -c '%s %Y' \
            "$build/lib/libtacl.so" 2>/dev/null)"
    fi
    if [ -n "$ok_key" ] && [ "$(cat "$ok_file" 2>/dev/null)" = "$ok_key" ]; then
        rc=0
    else
        "$src/tests/torch/run_torch.sh" "$src" "$build" 1 \
            "$TRAIN_DIR/binding_ok.py" > "$build/tests/torch/binding_ok.log" 2>&1
        rc=$?
        # The stamp after the run: run_torch.sh may have just built it.
        [ "$rc" -eq 0 ] && [ -f "$build/tests/torch/site/.stamp" ] &&
            echo "$(cat "$build/tests/torch/site/.stamp") $(stat -L -c '%s %Y' \
                "$build/lib/libtacl.so" 2>/dev/null)" > "$ok_file"
    fi
    if [ "$rc" -eq 77 ]; then
        echo "SKIP: tests/torch/run_torch.sh skipped"
        exit 77
    elif [ "$rc" -ne 0 ]; then
        echo "FAIL: the tacl_torch binding does not build or import:"
        tail -n 20 "$build/tests/torch/binding_ok.log"
        exit 1
    fi
    export PYTHONPATH=$build/tests/torch/site${PYTHONPATH:+:$PYTHONPATH}
    TMP=$(mktemp -d) || exit 1
    trap 'rm -rf "$TMP"' EXIT
    # DeepSpeed's CPU accelerator and quiet, single-threaded ranks.
    export DS_ACCELERATOR=cpu OMP_NUM_THREADS=1 TACL_DEBUG=WARN
    export PYTHONUNBUFFERED=1
}

# show_failed_run OUT: what a failed torchrun left in OUT.  Its last lines
# are the agent's summary, which names the rank that failed first but not
# why, so the first traceback (where a rank printed one) comes first.
show_failed_run() {
    awk '/Traceback/ && !shown { shown = 1; n = 0; print "  first traceback:" }
         shown == 1 && n < 40 { print "    " $0; n++ }' "$1"
    echo "  last lines:"
    tail -n 25 "$1"
}

# run_logged NAME BACKEND OUT CMD...: run CMD, a run on torch.distributed
# backend BACKEND, with its output in OUT; one check that it exits 0
# (show_failed_run shows why when it does not).  A failed gloo run is the
# reference, not what is tested, and gloo's TCP transport fails now and
# then on its own ("Connection closed by peer"; PyTorch issues 53270,
# 57469, 61201): its failure is shown and it runs once more.  A tacl run
# gets one chance.  A run that prints a line starting "skipped:" (the
# installed torch lacks what it needs) skips the whole test: exit 77.
run_logged() {
    local name=$1 backend=$2 out=$3 rc
    shift 3

    "$@" > "$out" 2>&1
    rc=$?
    if [ "$rc" -eq 77 ] || grep -q '^skipped:' "$out"; then
        grep -m1 '^skipped:' "$out" || echo "skipped: $name exited 77"
        exit 77
    fi
    if [ "$rc" -ne 0 ] && [ "$backend" = gloo ]; then
        echo "note: $name: the gloo reference run failed (exit $rc);" \
            "running it once more"
        show_failed_run "$out"
        "$@" > "$out" 2>&1
        rc=$?
    fi
    checks=$((checks + 1))
    if [ "$rc" -ne 0 ]; then
        fail "$name: exit $rc"
        show_failed_run "$out"
        return 1
    fi
    ok "$name"
}

compare_runs() {
    local name=$1 rtol=$2

    checks=$((checks + 1))
    if "$PY" "$TRAIN_DIR/compare_losses.py" --rtol "$rtol" \
            --names "${NAMES:-gloo,tacl}" --title "$name" "$3" "$4"; then
        ok "$name: losses agree"
    else
        fail "$name: losses differ"
    fi
}

# The emulated 2x2 cluster (tools/tacl-cluster: 2 nodes, each its own
# network namespace at 10.77.0.<node+1> on eth0).  cluster_check TOOL exits
# 77 where the tool cannot run (no root or namespaces).
cluster_check() {
    CLUSTER=$1
    if ! "$CLUSTER" --check > /dev/null 2>&1; then
        echo "SKIP: tacl-cluster --check failed: needs root and namespaces"
        exit 77
    fi
    # gloo finds its address from the host name, which no node resolves.
    export GLOO_SOCKET_IFNAME=eth0
}

# cluster_ranks CMD...: tacl-cluster's own launcher starts the 4 ranks
# (2 per node) with torchrun's variables (RANK, WORLD_SIZE, LOCAL_RANK,
# MASTER_ADDR=node 0, MASTER_PORT), so CMD initialises with env://.
cluster_ranks() {
    "$CLUSTER" --nodes 2 --ranks-per-node 2 --timeout 240 -- "$@"
}

# cluster_torchrun SCRIPT ARGS...: one torchrun per node in its
# multi-node form (--nnodes 2 --node-rank NODE --nproc-per-node 2, the
# rendezvous at node 0's address), as on a real cluster.  The launcher's
# per-rank variables describe the one process per node it starts here, so
# they are removed and torchrun sets its own.
cluster_torchrun() {
    "$CLUSTER" --nodes 2 --ranks-per-node 1 --timeout 240 -- \
        env -u RANK -u WORLD_SIZE -u LOCAL_RANK -u LOCAL_WORLD_SIZE \
        -u TACL_RANK -u TACL_NRANKS -u TACL_LOCAL_RANK -u TACL_LOCAL_SIZE \
        -u TACL_ROOT_ADDR \
        bash -c 'exec "$0" --nnodes 2 --node-rank "$NODE_RANK" \
            --nproc-per-node 2 --master-addr "$MASTER_ADDR" \
            --master-port "$MASTER_PORT" "$@"' "$TORCHRUN" "$@"
}
