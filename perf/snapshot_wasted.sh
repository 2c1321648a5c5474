#!/bin/bash
# Wasted time per failure (issue 29's must-show; the thesis' Equation
# 6.1, T_wasted = t_ckpt + 1/(2f) + t_rtvl): tacl's snapshots in peers'
# memory against the engine's file checkpoint kept on a remote storage
# node, each at its best sustainable frequency, from measured times.
#
# Design.  One tools/tacl-cluster job per layout and launch, every node
# uplink shaped to INTER_RATE, and a storage node (--storage-rate) behind
# a link shaped to 1/STORAGE_SHARE (20) of the nodes' aggregate uplink
# rate, running perf/storage_node.py.  node 1 is replaced between the
# job's two phases (--replace-node 1: its processes and /dev/shm die, as
# in a hardware failure).  Each rank runs the engine (the model of
# perf/snapshot_overhead.sh) in phase 1:
#   1. STEPS steps without snapshots: T_iter = batch / the summary's rate;
#   2. STEPS steps with a blocking snapshot every step: the step's extra
#      time over 1 is what a save costs when the step waits for it;
#   3. STEPS steps with background snapshots every step (the stores kept
#      at the end, --snapshot-keep, as if the job had failed there): a
#      save's mean time from its start to its copies' arrival
#      (tacl_snapshot_stats' transfer) is t_ckpt in memory,
#      whose files (--snapshot-file, flushed after the last step) every
#      rank then puts on the storage node at once: the slowest put is
#      t_ckpt for the file checkpoint; the local files are then removed.
# and in phase 2, on the replaced cluster:
#   4. --resume from peer memory (the set of 3; node 1's ranks fetch
#      their states from their peers): the engine's restore time is
#      t_rtvl in memory;
#   5. every rank gets its file back from the storage node at once, and
#      --resume under a fresh key reads them: t_rtvl for the file
#      checkpoint is the slowest get plus that restore.
# The best sustainable frequency is one checkpoint per max(t_ckpt,
# T_iter) for both (the thesis' Equation 6.2): a file checkpoint cannot
# start its next upload before the last has ended.  Restarting processes
# and replacing machines are left out, as the thesis leaves them out.
# The table gives each term (median over the launches) and the ratio.
#
# Usage: perf/snapshot_wasted.sh BUILD_DIR [OUT_DIR]
# Environment: LAYOUTS ("2x2"), STRATEGY (ZeRO-3), REPEAT (3), STEPS (6),
# INTER_RATE (1gbit), STORAGE_SHARE (20), MODEL (engine flags).
# Needs root and namespaces (tacl-cluster --check); exit 77 without.
set -u
build=${1:?usage: snapshot_wasted.sh BUILD_DIR [OUT_DIR]}
out=${2:-$build/snapshot_wasted}
HERE=$(cd "$(dirname "$0")" && pwd)
CLUSTER=$HERE/../tools/tacl-cluster
STORE=$HERE/storage_node.py
TRAIN=$(cd "$build" && pwd)/engine/train
LAYOUTS=${LAYOUTS:-2x2}
STRATEGY=${STRATEGY:-ZeRO-3}
REPEAT=${REPEAT:-3}
STEPS=${STEPS:-6}
INTER_RATE=${INTER_RATE:-1gbit}
STORAGE_SHARE=${STORAGE_SHARE:-20}
MODEL=${MODEL:---ctx 8 --emb 32 --hidden 1024 --blocks 4 --batch 2048 --micro-steps 1}
PORT=29650

if ! "$CLUSTER" --check >/dev/null 2>&1; then
    echo "snapshot_wasted: tacl-cluster cannot run here (root and" \
        "namespaces needed)" >&2
    exit 77
fi
[ -x "$TRAIN" ] || { echo "snapshot_wasted: no $TRAIN" >&2; exit 2; }
case $INTER_RATE in
*gbit) inter_mbit=$(( ${INTER_RATE%gbit} * 1000 )) ;;
*mbit) inter_mbit=${INTER_RATE%mbit} ;;
*) echo "snapshot_wasted: INTER_RATE wants Ngbit or Nmbit" >&2; exit 2 ;;
esac
work=$(mktemp -d /tmp/tacl-snap-wasted.XXXXXX) || exit 1
trap 'rm -rf "$work"; rm -f /dev/shm/tacl-snap-swt$$-*' EXIT
mkdir -p "$out"
rm -f "$out"/*.log

# What each rank runs, in both phases (TACL_CLUSTER_PHASE).
cat > "$work/rank.sh" << 'EOS'
dir=$1 key=$2 steps=$3 store=$4 port=$5 train=$6; shift 6
r=$TACL_RANK
log() { "$@" > "$dir/$name.$r" 2>&1 || { tail -5 "$dir/$name.$r" >&2; exit 1; }; }
if [ "$TACL_CLUSTER_PHASE" = 1 ]; then
    name=none log "$train" "$@" --steps "$steps"
    name=blocking log "$train" "$@" --steps "$steps" --snapshot-every 1 \
        --snapshot-mode blocking --snapshot-key "$key-b"
    name=background log "$train" "$@" --steps "$steps" --snapshot-every 1 \
        --snapshot-key "$key" --snapshot-file "$dir/local/ckpt" \
        --snapshot-keep
    name=put log python3 "$store" put "$TACL_CLUSTER_STORAGE:$port" \
        "$dir/local/ckpt.rank$r" "ckpt.rank$r"
    rm -f "$dir/local/ckpt.rank$r"
else
    name=resume_mem log "$train" "$@" --steps $((steps + 1)) --resume \
        --snapshot-every 1 --snapshot-key "$key"
    name=get log python3 "$store" get "$TACL_CLUSTER_STORAGE:$port" \
        "ckpt.rank$r" "$dir/fetched/ckpt.rank$r"
    name=resume_file log "$train" "$@" --steps $((steps + 1)) --resume \
        --snapshot-key "$key-f" --snapshot-file "$dir/fetched/ckpt"
fi
EOS

for layout in $LAYOUTS; do
    nodes=${layout%x*} per=${layout#*x}
    storage_mbit=$(( nodes * inter_mbit / STORAGE_SHARE ))
    for rep in $(seq 1 "$REPEAT"); do
        echo "snapshot_wasted: $layout launch $rep of $REPEAT" \
            "(storage link ${storage_mbit}mbit)" >&2
        dir="$work/$layout.$rep"
        mkdir -p "$dir/local" "$dir/fetched" "$dir/storage"
        # shellcheck disable=SC2086
        "$CLUSTER" --nodes "$nodes" --ranks-per-node "$per" \
            --inter-rate "$INTER_RATE" --replace-node 1 --timeout 1800 \
            --storage-rate "${storage_mbit}mbit" \
            --storage-cmd "exec python3 '$STORE' serve '$dir/storage' $PORT" \
            -- bash "$work/rank.sh" "$dir" "swt$$-$rep" "$STEPS" "$STORE" \
            "$PORT" "$TRAIN" $MODEL --strategy "$STRATEGY" --quiet \
            > "$dir/job.log" 2>&1 ||
            { echo "snapshot_wasted: $layout launch $rep failed" >&2;
              tail -5 "$dir/job.log" >&2; }
        for f in "$dir"/*.[0-9]*; do
            [ -f "$f" ] && cp "$f" "$out/$layout.$rep.${f##*/}.log"
        done
        rm -f /dev/shm/tacl-snap-swt$$-*
    done
done
/usr/bin/python3 - "$out" "$LAYOUTS" "$REPEAT" "$MODEL" "$INTER_RATE" \
    "$STORAGE_SHARE" <<'EOF' | tee "$out/snapshot_wasted.md"
import glob, re, statistics, sys
out, layouts, repeat, model, rate, share = sys.argv[1:]
batch = float(re.search(r"--batch (\d+)", model).group(1))


def rank0(path, key):
    """A field of the rank-0 log: the word after key on its line."""
    try:
        for line in open(path):
            f = line.split()
            if key in f:
                return f
    except OSError:
        pass
    return None


def mean_transfer(path):
    """A save's mean time to its copies' arrival, from the engine's
    snapshots line (tacl_snapshot_stats)."""
    f = rank0(path, "snapshots")
    if not f or "total_transfer_s" not in f:
        return None
    saves = int(f[f.index("saved") + 1])
    return float(f[f.index("total_transfer_s") + 1]) / max(saves, 1)


def summary_step(path):
    f = rank0(path, "summary")
    return batch / float(f[f.index("tokens/s") + 1]) if f else None


def restore_s(path):
    f = rank0(path, "restored")
    return float(f[f.index("in") + 1]) if f else None


def slowest(pattern, word):
    times = []
    for p in glob.glob(pattern):
        f = rank0(p, word)
        if f:
            times.append(float(f[3]))
    return max(times) if times else None


def node_bytes(prefix, node, per):
    """The bytes of node's ranks' files: what its restore fetches."""
    total = 0
    for r in range(node * per, (node + 1) * per):
        f = rank0(f"{prefix}.put.{r}.log", "put")
        if not f:
            return None
        total += int(f[2])
    return total


print(f"# Wasted time per failure (Equation 6.1), {model.strip()}, "
      f"uplinks {rate}, storage link 1/{share} of the nodes' aggregate, "
      "node 1 replaced\n")
print("| layout | launch | T_iter s | blocking save s | "
      "t_ckpt mem s | t_rtvl mem s | "
      "node 1's restore, share of its link | "
      "T_wasted mem s | t_ckpt file s | t_rtvl file s (get + load) | "
      "T_wasted file s | file / mem |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
link_bits = float(rate[:-4]) * (1e9 if rate.endswith("gbit") else 1e6)
for lay in layouts.split():
    rows = []
    for rep in range(1, int(repeat) + 1):
        p = f"{out}/{lay}.{rep}"
        t_iter = summary_step(f"{p}.background.0.log")
        none = summary_step(f"{p}.none.0.log")
        blocking = summary_step(f"{p}.blocking.0.log")
        rtvl_mem = restore_s(f"{p}.resume_mem.0.log")
        put = slowest(f"{p}.put.*.log", "put")
        get = slowest(f"{p}.get.*.log", "get")
        load = restore_s(f"{p}.resume_file.0.log")
        moved = node_bytes(p, 1, int(lay.split("x")[1]))
        ckpt_mem = mean_transfer(f"{p}.background.0.log")
        if None in (t_iter, none, blocking, rtvl_mem, put, get, load, moved,
                    ckpt_mem):
            print(f"| {lay} | {rep} | (a run failed: see {p}.*.log) "
                  "|||||||||||")
            continue
        share = moved * 8 / rtvl_mem / link_bits
        waited = max(blocking - none, 0.0)
        mem = ckpt_mem + max(ckpt_mem, t_iter) / 2 + rtvl_mem
        rtvl_file = get + load
        file = put + max(put, t_iter) / 2 + rtvl_file
        rows.append((t_iter, waited, ckpt_mem, rtvl_mem, share, mem, put,
                     rtvl_file, file, file / mem))
        print(f"| {lay} | {rep} | {t_iter:.3f} | {waited:.3f} | "
              f"{ckpt_mem:.3f} | "
              f"{rtvl_mem:.3f} | {share:.0%} ({moved / 1e6:.1f} MB) | "
              f"{mem:.3f} | {put:.3f} | "
              f"{rtvl_file:.3f} ({get:.3f} + {load:.3f}) | {file:.3f} | "
              f"{file / mem:.1f}x |")
    if rows:
        med = [statistics.median(c) for c in zip(*rows)]
        print(f"| {lay} | median | {med[0]:.3f} | {med[1]:.3f} | "
              f"{med[2]:.3f} | {med[3]:.3f} | {med[4]:.0%} | {med[5]:.3f} | "
              f"{med[6]:.3f} | {med[7]:.3f} | {med[8]:.3f} | "
              f"{med[9]:.1f}x |")
EOF
