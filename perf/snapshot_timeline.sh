#!/bin/bash
# Recovery timeline (issue 29's must-show): what happens, and when, from
# a failure to the first step after it, with the state restored from
# peer memory.  Every instant is the engine's `--timeline` line (rank
# 0's wall clock; the killed rank's for the kill) or this script's clock
# when a launcher returns, all on this one machine's clock.
#
# Design.  Two failures, each REPEAT times:
#  - a killed rank (a software failure): 4 ranks under tacl-run on this
#    host train with a snapshot every step; rank 1 SIGKILLs itself after
#    step KILL_AT (--kill-at).  The timeline: the kill, rank 0's step
#    failing (tacl noticed the dead peer; nan when tacl-run stopped rank 0
#    first), tacl-run returning (the job stopped), then the job started again with --resume: its start, its
#    communicator, the restore (each rank from its own node-local store)
#    and the first step done;
#  - a replaced node (a hardware failure): tools/tacl-cluster 2 nodes x 2
#    ranks, uplinks shaped to INTER_RATE, --replace-node 1.  Phase 1
#    trains and ends keeping its stores (--snapshot-keep); node 1 is torn
#    down (its processes and /dev/shm die) and made again; phase 2 starts
#    with --resume: node 1's ranks fetch their states from their peers.
#    The timeline starts when phase 1's rank 0 has ended.
# Times are seconds after the failure, and the restore's own time (the
# engine's "resume: restored ... in T s"); the table gives each launch and
# the median.
#
# Usage: perf/snapshot_timeline.sh BUILD_DIR [OUT_DIR]
# Environment: REPEAT (3), STEPS (6), KILL_AT (4), INTER_RATE (1gbit),
# STRATEGY (ZeRO-3), MODEL (engine flags, perf/snapshot_overhead.sh's).
# Needs root and namespaces for the replaced node (tacl-cluster --check);
# without them that part is skipped, said so in the table.
set -u
build=$(cd "${1:?usage: snapshot_timeline.sh BUILD_DIR [OUT_DIR]}" && pwd)
out=${2:-$build/snapshot_timeline}
HERE=$(cd "$(dirname "$0")" && pwd)
CLUSTER=$HERE/../tools/tacl-cluster
RUN=$build/tools/tacl-run
TRAIN=$build/engine/train
REPEAT=${REPEAT:-3}
STEPS=${STEPS:-6}
KILL_AT=${KILL_AT:-4}
INTER_RATE=${INTER_RATE:-1gbit}
STRATEGY=${STRATEGY:-ZeRO-3}
MODEL=${MODEL:---ctx 8 --emb 32 --hidden 1024 --blocks 4 --batch 2048 --micro-steps 1}

for f in "$RUN" "$TRAIN"; do
    [ -x "$f" ] || { echo "snapshot_timeline: no $f" >&2; exit 2; }
done
work=$(mktemp -d /tmp/tacl-snap-timeline.XXXXXX) || exit 1
trap 'rm -rf "$work"; rm -f /dev/shm/tacl-snap-stl$$-*' EXIT
mkdir -p "$out"
rm -f "$out"/*.log
now() { date +%s.%N; }

# shellcheck disable=SC2086
for rep in $(seq 1 "$REPEAT"); do
    echo "snapshot_timeline: launch $rep of $REPEAT" >&2
    key=stl$$-$rep
    log=$out/killed.$rep.log
    "$RUN" -n 4 --timeout 600 -- "$TRAIN" $MODEL --strategy "$STRATEGY" \
        --steps "$STEPS" --snapshot-every 1 --snapshot-key "$key" \
        --timeline --quiet --kill-at "1:$KILL_AT" > "$log" 2>&1
    echo "timeline job_stopped $(now)" >> "$log"
    "$RUN" -n 4 --timeout 600 -- "$TRAIN" $MODEL --strategy "$STRATEGY" \
        --steps "$STEPS" --snapshot-every 1 --snapshot-key "$key" \
        --timeline --quiet --resume 2>&1 | sed 's/^timeline /timeline again_/' \
        >> "$log"
    rm -f /dev/shm/tacl-snap-$key-*
    if "$CLUSTER" --check > /dev/null 2>&1; then
        # shellcheck disable=SC2016
        "$CLUSTER" --nodes 2 --ranks-per-node 2 --inter-rate "$INTER_RATE" \
            --replace-node 1 --no-prefix --timeout 1200 -- sh -c '
            train=$1 steps=$2; shift 2
            if [ "$TACL_CLUSTER_PHASE" = 1 ]; then
                "$train" "$@" --steps "$steps" --snapshot-keep
                rc=$?
                [ "$TACL_RANK" = 0 ] &&
                    echo "timeline phase1_end $(date +%s.%N)"
                exit $rc
            fi
            "$train" "$@" --steps $((steps + 2)) --resume 2>&1 |
                sed "s/^timeline /timeline again_/"
            ' sh "$TRAIN" "$STEPS" $MODEL --strategy "$STRATEGY" \
            --snapshot-every 1 --snapshot-key "$key-n" --timeline --quiet \
            > "$out/replaced.$rep.log" 2>&1
    fi
done
/usr/bin/python3 - "$out" "$REPEAT" "$MODEL" "$INTER_RATE" <<'EOF' |
import statistics, sys
out, repeat, model, rate = sys.argv[1], int(sys.argv[2]), *sys.argv[3:]


def events(path):
    """The timeline's instants, and the restore's own time as
    "restore" (the engine's "resume: restored ... in T s")."""
    ev = {}
    try:
        for line in open(path):
            f = line.split()
            if len(f) == 3 and f[0] == "timeline":
                ev.setdefault(f[1], float(f[2]))
            if f[:2] == ["resume:", "restored"] and "in" in f:
                ev.setdefault("restore", float(f[f.index("in") + 1]))
    except OSError:
        pass
    return ev


KINDS = {
    "killed": ("kill", ["failed", "job_stopped", "again_start",
                        "again_communicator", "again_restored",
                        "again_first_step"],
               "a killed rank (4 ranks, one node, tacl-run)"),
    "replaced": ("phase1_end", ["again_start", "again_communicator",
                                "again_restored", "again_first_step"],
                 f"a replaced node (2 nodes x 2 ranks, {rate} uplinks)"),
}
print(f"# Recovery timeline, {model.strip()}; seconds after the failure\n")
for kind, (zero, names, what) in KINDS.items():
    print(f"## {what}\n")
    print("| launch | " + " | ".join(names) + " | restore itself |")
    print("|---" * (len(names) + 2) + "|")
    rows = []
    for rep in range(1, repeat + 1):
        ev = events(f"{out}/{kind}.{rep}.log")
        need = [zero, "restore"] + [n for n in names if n != "failed"]
        if any(n not in ev for n in need):
            missing = [n for n in need if n not in ev]
            print(f"| {rep} | no run (missing {', '.join(missing)}: see "
                  f"{kind}.{rep}.log) |")
            continue
        # "failed" only when tacl noticed the dead peer before the
        # launcher stopped rank 0.
        row = [ev[n] - ev[zero] if n in ev else float("nan") for n in names]
        row.append(ev["restore"])
        rows.append(row)
        print(f"| {rep} | " + " | ".join(f"{v:.3f}" for v in row) + " |")
    if rows:
        med = [statistics.median([v for v in c if v == v] or [float("nan")])
               for c in zip(*rows)]
        print("| median | " + " | ".join(f"{v:.3f}" for v in med) + " |")
    print()
EOF
    tee "$out/snapshot_timeline.md"
