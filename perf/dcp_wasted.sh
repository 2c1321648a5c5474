#!/bin/bash
# Wasted time per failure (the thesis' Equation 6.1, T_wasted = t_ckpt +
# 1/(2f) + t_rtvl) for torch DCP's async_save to a remote storage node:
# the third column of issue 29's comparison, beside perf/snapshot_wasted.sh
# (tacl's snapshots in peers' memory, the engine's file checkpoint).
#
# Design.  The cluster is snapshot_wasted.sh's: one tools/tacl-cluster job
# per launch, 2 nodes x 2 ranks (LAYOUT), every node uplink shaped to
# INTER_RATE, a storage node (perf/storage_node.py at 10.77.0.250) behind
# a link shaped to 1/STORAGE_SHARE (20) of the nodes' aggregate, node 1
# replaced between the job's two phases (--replace-node 1).  The ranks
# run torch on the tacl backend (tacl_torch), perf/dcp_wasted.py:
#   phase 1: an FSDP2 MLP with Adam whose state is about 8.7 MB a rank,
#     as the engine model's of snapshot_wasted.sh (WIDTH 980, BLOCKS 3),
#     trains STEPS steps without checkpoints (T_iter), then takes SAVES
#     dcp.async_save checkpoints through a FileSystemWriter whose
#     background work puts its files on the storage node before the save
#     completes (dcp_wasted.py's docstring says how this stands for a
#     remote writer such as DCP's fsspec/S3 one), each at the best
#     sustainable frequency: the next save starts after the step in which
#     the last completed.  t_ckpt is a save's mean time from the call to
#     its future's completion; "blocked" the training thread's time in
#     the call (the staging copy);
#   phase 2, node 1 replaced: every rank gets the metadata and the files
#     its load reads back from the storage node into a fresh folder and
#     dcp.loads them: t_rtvl is the slowest rank's time, get plus load;
#     the loaded state must equal the saved one.
# Equation 6.1 at one checkpoint per max(t_ckpt, T_iter), as in
# snapshot_wasted.sh.  With MEM_TABLE naming that script's
# snapshot_wasted.md (same cluster, same rates), the table gains a column
# DCP / mem against its median T_wasted in memory, and the last lines set
# the three medians side by side.
#
# Usage: perf/dcp_wasted.sh BUILD_DIR [OUT_DIR]
#   e.g. REPEAT=1 STEPS=3 SAVES=2 perf/dcp_wasted.sh build   (a smoke run)
#        MEM_TABLE=build/snapshot_wasted/snapshot_wasted.md \
#            perf/dcp_wasted.sh build                        (the figures)
# Environment: REPEAT (3), STEPS (6), SAVES (3), INTER_RATE (1gbit),
# STORAGE_SHARE (20), WIDTH (980), BLOCKS (3), BATCH (1024 a rank),
# LAYOUT (2x2), MEM_TABLE (none), LIMIT (seconds a launch, 900),
# REPORT_ONLY (1: no launches, the table from the REPEAT launches' logs
# already in OUT_DIR).
# Exit status 0; 1 when every launch failed; 77 without root and
# namespaces (tacl-cluster --check), the torch environment or the binding.
set -u
BUILD=$(cd "${1:?usage: dcp_wasted.sh BUILD_DIR [OUT_DIR]}" && pwd)
SRC=$(cd "$(dirname "$0")/.." && pwd)
out=${2:-$BUILD/dcp_wasted}
REPEAT=${REPEAT:-3}
STEPS=${STEPS:-6}
SAVES=${SAVES:-3}
INTER_RATE=${INTER_RATE:-1gbit}
STORAGE_SHARE=${STORAGE_SHARE:-20}
WIDTH=${WIDTH:-980}
BLOCKS=${BLOCKS:-3}
BATCH=${BATCH:-1024}
LAYOUT=${LAYOUT:-2x2}
MEM_TABLE=${MEM_TABLE:-}
LIMIT=${LIMIT:-900}
REPORT_ONLY=${REPORT_ONLY:-0}
STORE=$SRC/perf/storage_node.py
PORT=29651

. "$SRC/tests/common/checks.sh"
. "$SRC/tests/torch/train_env.sh"
cluster_check "$SRC/tools/tacl-cluster"
train_setup "$SRC" "$BUILD"  # sets PY, PYTHONPATH and TMP
case $INTER_RATE in
*gbit) inter_mbit=$(( ${INTER_RATE%gbit} * 1000 )) ;;
*mbit) inter_mbit=${INTER_RATE%mbit} ;;
*) echo "dcp_wasted: INTER_RATE wants Ngbit or Nmbit" >&2; exit 2 ;;
esac
nodes=${LAYOUT%x*} per=${LAYOUT#*x}
storage_mbit=$(( nodes * inter_mbit / STORAGE_SHARE ))
mkdir -p "$out"
[ "$REPORT_ONLY" = 1 ] || rm -f "$out"/*.log

failed=0 launches=$REPEAT
[ "$REPORT_ONLY" = 1 ] && launches=0
for rep in $(seq 1 "$launches"); do
    echo "dcp_wasted: $LAYOUT launch $rep of $REPEAT" \
        "(storage link ${storage_mbit}mbit)" >&2
    dir="$TMP/$LAYOUT.$rep"
    mkdir -p "$dir/local" "$dir/fetched" "$dir/storage"
    "$CLUSTER" --nodes "$nodes" --ranks-per-node "$per" \
        --inter-rate "$INTER_RATE" --replace-node 1 --timeout "$LIMIT" \
        --storage-rate "${storage_mbit}mbit" \
        --storage-cmd "exec python3 '$STORE' serve '$dir/storage' $PORT" \
        -- bash -c 'mode=load; [ "$TACL_CLUSTER_PHASE" = 1 ] && mode=save
            exec "$0" "$@" --worker "$mode" \
                --storage "$TACL_CLUSTER_STORAGE:'"$PORT"'"' \
        "$PY" "$SRC/perf/dcp_wasted.py" --dir "$dir" --steps "$STEPS" \
        --saves "$SAVES" --width "$WIDTH" --blocks "$BLOCKS" \
        --batch "$BATCH" > "$out/$LAYOUT.$rep.log" 2>&1 || {
        failed=$((failed + 1))
        echo "dcp_wasted: launch $rep failed; its last lines:" >&2
        tail -8 "$out/$LAYOUT.$rep.log" >&2
    }
done
[ "$launches" -eq 0 ] || [ "$failed" -lt "$launches" ] || exit 1

/usr/bin/python3 - "$out" "$LAYOUT" "$REPEAT" "$INTER_RATE" \
    "$STORAGE_SHARE" "$WIDTH" "$BLOCKS" "$BATCH" "$MEM_TABLE" <<'EOF' |
import re, statistics, sys
out, layout, repeat, rate, share, width, blocks, batch, mem_table = \
    sys.argv[1:]
LINE = re.compile(r"\bdcp (state|save|load) (.*)$")


def launch(path):
    """The rank-0 lines of one launch: state, saves, load (dicts)."""
    state, saves, load = None, [], None
    try:
        for line in open(path):
            m = LINE.search(line)
            if not m:
                continue
            w = m.group(2).split()
            if m.group(1) == "state":
                state = {"bytes": int(w[0]), "t_iter": float(w[2])}
            elif m.group(1) == "save":
                saves.append(dict(zip(w[1::2], map(float, w[2::2]))))
            else:
                load = dict(zip(w[0::2], map(float, w[1::2])))
    except OSError:
        pass
    return state, saves, load


def mem_median():
    """snapshot_wasted.md's median row for this layout: T_wasted in
    memory and for the engine's file checkpoint."""
    if not mem_table:
        return None
    try:
        for line in open(mem_table):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if cells[:2] == [layout, "median"]:
                return float(cells[7]), float(cells[10])
    except (OSError, ValueError, IndexError):
        pass
    sys.stderr.write(f"dcp_wasted: no {layout} median row in {mem_table}\n")
    return None


mem = mem_median()
print(f"# Wasted time per failure (Equation 6.1), torch DCP async_save to "
      f"the storage node: FSDP2 MLP {blocks} x {width}^2 with Adam, batch "
      f"{batch} a rank, uplinks {rate}, storage link 1/{share} of the "
      f"nodes' aggregate, node 1 replaced\n")
head = ("| layout | launch | state MB a rank | T_iter s | blocked in "
        "async_save s | steps a save | step with saves / without | "
        "upload s (slowest rank) | t_ckpt DCP s | "
        "t_rtvl DCP s (get + load) | T_wasted DCP s |")
print(head + (" DCP / mem |" if mem else ""))
print("|---" * (head.count("|") - 1 + bool(mem)) + "|")
rows = []
for rep in range(1, int(repeat) + 1):
    state, saves, load = launch(f"{out}/{layout}.{rep}.log")
    if state is None or not saves or load is None:
        print(f"| {layout} | {rep} | (the launch failed: see "
              f"{out}/{layout}.{rep}.log) |" + "|" * (8 + bool(mem)))
        continue

    def mean(key):
        return statistics.mean(s[key] for s in saves)
    t_iter, ckpt, rtvl = state["t_iter"], mean("t_ckpt"), load["t_rtvl"]
    wasted = ckpt + max(ckpt, t_iter) / 2 + rtvl
    row = (state["bytes"] / 1e6, t_iter, mean("blocked"), mean("steps"),
           mean("step") / t_iter, mean("upload"), ckpt, rtvl, wasted)
    rows.append(row)
    text = (f"| {layout} | {rep} | {row[0]:.2f} | {t_iter:.3f} | "
            f"{row[2]:.3f} | {row[3]:.1f} | {row[4]:.2f} | {row[5]:.3f} | "
            f"{ckpt:.3f} | {rtvl:.3f} ({load['get']:.3f} + "
            f"{rtvl - load['get']:.3f}) | {wasted:.3f} |")
    print(text + (f" {wasted / mem[0]:.1f}x |" if mem else ""))
if rows:
    med = [statistics.median(c) for c in zip(*rows)]
    text = (f"| {layout} | median | {med[0]:.2f} | {med[1]:.3f} | "
            f"{med[2]:.3f} | {med[3]:.1f} | {med[4]:.2f} | {med[5]:.3f} | "
            f"{med[6]:.3f} | {med[7]:.3f} | {med[8]:.3f} |")
    print(text + (f" {med[8] / mem[0]:.1f}x |" if mem else ""))
    if mem:
        print(f"\nMedian T_wasted: tacl memory {mem[0]:.3f} s, engine file "
              f"{mem[1]:.3f} s ({mem[1] / mem[0]:.1f}x memory's), torch DCP "
              f"async_save {med[8]:.3f} s ({med[8] / mem[0]:.1f}x memory's)")
EOF
tee "$out/dcp_wasted.md"
