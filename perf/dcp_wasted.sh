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
# With PEER=1 (the default) the same job also saves and loads through
# DCP's API into tacl's peer memory (tacl_torch.PeerStorageWriter and
# PeerStorageReader; node 1's ranks fetch from their peers): a second
# table, tacl memory through DCP, beside the file's.
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
# PEER (1), REPORT_ONLY (1: no launches, the tables from the REPEAT
# launches' logs already in OUT_DIR).
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
PEER=${PEER:-1}
STORE=$SRC/perf/storage_node.py
PORT=29651

. "$SRC/tests/common/checks.sh"
. "$SRC/tests/torch/train_env.sh"
cluster_check "$SRC/tools/tacl-cluster"
train_setup "$SRC" "$BUILD"  # sets PY, PYTHONPATH and TMP
trap 'rm -rf "$TMP"; rm -f /dev/shm/tacl-snap-dcpw$$-*' EXIT
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
    peer=()
    [ "$PEER" = 1 ] && peer=(--peer-key "dcpw$$-$rep")
    "$CLUSTER" --nodes "$nodes" --ranks-per-node "$per" \
        --inter-rate "$INTER_RATE" --replace-node 1 --timeout "$LIMIT" \
        --storage-rate "${storage_mbit}mbit" \
        --storage-cmd "exec python3 '$STORE' serve '$dir/storage' $PORT" \
        -- bash -c 'mode=load; [ "$TACL_CLUSTER_PHASE" = 1 ] && mode=save
            exec "$0" "$@" --worker "$mode" \
                --storage "$TACL_CLUSTER_STORAGE:'"$PORT"'"' \
        "$PY" "$SRC/perf/dcp_wasted.py" --dir "$dir" --steps "$STEPS" \
        --saves "$SAVES" --width "$WIDTH" --blocks "$BLOCKS" \
        --batch "$BATCH" "${peer[@]}" > "$out/$LAYOUT.$rep.log" 2>&1 || {
        failed=$((failed + 1))
        echo "dcp_wasted: launch $rep failed; its last lines:" >&2
        tail -8 "$out/$LAYOUT.$rep.log" >&2
    }
    rm -f /dev/shm/tacl-snap-dcpw$$-*
    rm -rf "$dir"  # its checkpoints: SAVES x the state, twice
done
[ "$launches" -eq 0 ] || [ "$failed" -lt "$launches" ] || exit 1

/usr/bin/python3 - "$out" "$LAYOUT" "$REPEAT" "$INTER_RATE" \
    "$STORAGE_SHARE" "$WIDTH" "$BLOCKS" "$BATCH" "$MEM_TABLE" <<'EOF' |
import re, statistics, sys
out, layout, repeat, rate, share, width, blocks, batch, mem_table = \
    sys.argv[1:]
LINE = re.compile(r"\bdcp (state|save|load|peer-save|peer-load) (.*)$")


def launch(path):
    """The rank-0 lines of one launch: state (a dict), then per kind
    ("save", "load", "peer-save", "peer-load") a list of dicts."""
    state, got = None, {}
    try:
        for line in open(path):
            m = LINE.search(line)
            if not m:
                continue
            w = m.group(2).split()
            if m.group(1) == "state":
                state = {"bytes": int(w[0]), "t_iter": float(w[2])}
                continue
            if m.group(1).endswith("save"):
                w = w[1:]
            got.setdefault(m.group(1), []).append(
                dict(zip(w[0::2], map(float, w[1::2]))))
    except OSError:
        pass
    return state, got


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


def wasted(t_iter, saves, load):
    """Equation 6.1 at one save per max(t_ckpt, T_iter): t_ckpt (the
    mean of the saves) and T_wasted."""
    ckpt = statistics.mean(s["t_ckpt"] for s in saves)
    return ckpt, ckpt + max(ckpt, t_iter) / 2 + load["t_rtvl"]


def table(title, head, cells, ratio, optional=False):
    """One table: a row per launch from cells(state, got) (None when the
    launch lacks its lines), the medians, and T_wasted (the last cell)
    over ratio when given; the median T_wasted.  An optional table no
    launch has lines for is left out."""
    head += " T_wasted s |" + (f" T_wasted / {ratio[0]} |" if ratio
                               else "")
    lines = [f"\n{title}\n", head, "|---" * (head.count("|") - 1) + "|"]
    rows = []
    for rep in range(1, int(repeat) + 1):
        path = f"{out}/{layout}.{rep}.log"
        row = cells(*launch(path))
        if row is None:
            lines.append(f"| {layout} | {rep} | (the launch failed: see "
                         f"{path}) |" + "|" * (head.count("|") - 4))
            continue
        rows.append([v for v, _ in row])
        fmt = [f if isinstance(f, str) else ".3f" for _, f in row]
        text = " | ".join(f"{v:{f}}" if isinstance(f, str) else f(v)
                          for v, f in row)
        lines.append(f"| {layout} | {rep} | {text} |" +
                     (f" {row[-1][0] / ratio[1]:.1f}x |" if ratio else ""))
    if rows or not optional:
        print("\n".join(lines))
    if not rows:
        return None
    med = [statistics.median(c) for c in zip(*rows)]
    text = " | ".join(f"{v:{f}}" for v, f in zip(med, fmt))
    print(f"| {layout} | median | {text} |" +
          (f" {med[-1] / ratio[1]:.1f}x |" if ratio else ""))
    return med[-1]


def file_cells(state, got):
    if state is None or "save" not in got or "load" not in got:
        return None
    load = got["load"][0]
    t_iter = state["t_iter"]
    ckpt, total = wasted(t_iter, got["save"], load)

    def mean(key):
        return statistics.mean(s[key] for s in got["save"])
    rtvl = load["t_rtvl"]
    return [(state["bytes"] / 1e6, ".2f"), (t_iter, ".3f"),
            (mean("blocked"), ".3f"), (mean("steps"), ".1f"),
            (mean("step") / t_iter, ".2f"), (mean("write"), ".3f"),
            (mean("upload"), ".3f"),
            (ckpt, ".3f"),
            (rtvl, lambda v: f"{v:.3f} ({load['get']:.3f} + "
                             f"{v - load['get']:.3f})"),
            (total, ".3f")]


def peer_cells(state, got):
    if state is None or "peer-save" not in got or "peer-load" not in got:
        return None
    saves, load = got["peer-save"], got["peer-load"][0]
    ckpt, total = wasted(state["t_iter"], saves, load)
    return [(statistics.mean(s["blocked"] for s in saves), ".3f"),
            (statistics.mean(s["steps"] for s in saves), ".1f"),
            (ckpt, ".3f"), (load["t_rtvl"], ".3f"), (total, ".3f")]


mem = mem_median()
print(f"# Wasted time per failure (Equation 6.1) through torch DCP: FSDP2 "
      f"MLP {blocks} x {width}^2 with Adam, batch {batch} a rank, uplinks "
      f"{rate}, storage link 1/{share} of the nodes' aggregate, node 1 "
      "replaced")
file_med = table(
    "async_save to the storage node (FileSystemWriter, then uploads):",
    "| layout | launch | state MB a rank | T_iter s | blocked in "
    "async_save s | steps a save | step with saves / without | "
    "local write s | upload s | t_ckpt s | t_rtvl s (get + load) |",
    file_cells, ("mem", mem[0]) if mem else None)
peer_med = table(
    "async_save to tacl's peer memory (tacl_torch.PeerStorageWriter):",
    "| layout | launch | blocked in async_save s | steps a save | "
    "t_ckpt s | t_rtvl s |", peer_cells,
    ("mem", mem[0]) if mem else None, optional=True)
if file_med is not None and (peer_med or mem):
    print()
if file_med is not None and peer_med:
    print(f"Median T_wasted through DCP: storage node {file_med:.3f} s, "
          f"peer memory {peer_med:.3f} s ({file_med / peer_med:.1f}x lower)")
if file_med is not None and mem:
    print(f"Median T_wasted: tacl memory (the engine) {mem[0]:.3f} s, the "
          f"engine's file {mem[1]:.3f} s ({mem[1] / mem[0]:.1f}x memory's), "
          f"torch DCP to the storage node {file_med:.3f} s "
          f"({file_med / mem[0]:.1f}x memory's)")
EOF
tee "$out/dcp_wasted.md"
