#!/bin/bash
# Step time with a snapshot every step against none (issue 29's
# must-show, the thesis' Figure 6.16 beside it): the engine on the
# emulated cluster, every node uplink shaped to INTER_RATE (1gbit), each
# strategy without snapshots and with --snapshot-every 1 in each mode:
# background (tacl's background traffic class), foreground (every part at
# once) and blocking (the step waits for its copies).  One tacl-cluster
# job per layout and launch runs every configuration one after the
# other; the table gives, per layout, strategy and mode, the median over
# the launches of the summary's tokens/s (which counts what the snapshot
# holds the loop up) and the step-time ratio to no snapshots; beside it
# the steady ratio (the summary's steady_tokens/s: the steps after the
# first, whose warm-up and first save's store setup happen once a job),
# taken per launch against that launch's own run without snapshots, its
# median and range over the launches.  Even launches run the modes in
# reverse order.
#
# ALTERNATE=B measures inside each run instead: the engine saves before
# the steps of every other block of B steps only (--snapshot-alternate),
# so steps with a save's copies and steps without alternate every few
# seconds in one job, and a slow minute of the shared machine weighs on
# both alike.  No run without snapshots is made then (paced is
# skipped), and the table gives per mode the median over the launches of
# each run's ratio of its steps' median times (with a save before / none),
# their range, the mean-time ratio, rank 0's CPU time a step with and
# without a save (all its threads) and the transfer a save.
#
# The model (ctx 8, emb 32, hidden 1024, 4 blocks: 2.2 M parameters)
# with a global batch of 2048 in one micro-step: on 2x2 at 1 Gbit/s a
# ZeRO-3 step takes about 0.8 s.  Each rank's copy is its 6.5 MB of
# ZeRO-3 state (parameters and Adam's moments), sent to a peer on
# another node (0.1 s of a node's uplink for its two ranks at the line
# rate).
#
# Usage: perf/snapshot_overhead.sh BUILD_DIR [OUT_DIR]
# Environment: LAYOUTS ("2x2 4x2"), STRATEGIES ("ZeRO-3 MiCS"), MODES
# ("background foreground blocking paced"; also unpipelined: background
# with one part of a copy in flight at a time, the thesis' unpipelined
# chunking and the engine's default now, pipelined: four parts in
# flight, scheduled: the thesis' Algorithm 6.2 on the network's idle
# spans learned from the first 10 steps, whose plan a third table gives;
# with ALTERNATE, its steps are counted from the 11th; and own: the own
# copy alone, one replica, what a save costs without the network;
# sendall: background with --snapshot-send-all, every copy sent also
# where replicas (MiCS's groups) hold the same state, as before
# tacl_snapshot_replicated and as the thesis does), REPEAT (3), STEPS
# (12), INTER_RATE, MODEL (engine flags; the model below).  paced: background copies, a save skipped while the last
# one's still travel (--snapshot-pace 0, tacl_snapshot_due); the table
# then gives the saves made.  A second table breaks a save's cost down
# (the summary's snapshots line, tacl_snapshot_stats): per save, the
# medians over the launches of rank 0's means of the engine's pack of
# its shards, tacl's time in the caller's thread (save), in it the
# agreement that the previous save completed everywhere, its own copy
# (with the checksums unless TACL_SNAP_FUSED_CRC=0), a separate checksum
# pass, the transfer from the call to the request's completion, and the
# MB sent to peers.
# Needs root and namespaces (tacl-cluster --check); exit 77 without.

set -u
build=${1:?usage: snapshot_overhead.sh BUILD_DIR [OUT_DIR]}
out=${2:-$build/snapshot_overhead}
HERE=$(cd "$(dirname "$0")" && pwd)
CLUSTER=$HERE/../tools/tacl-cluster
TRAIN=$build/engine/train
LAYOUTS=${LAYOUTS:-2x2 4x2}
STRATEGIES=${STRATEGIES:-ZeRO-3 MiCS}
MODES=${MODES:-background foreground blocking paced}
ALTERNATE=${ALTERNATE:-0}
if [ "$ALTERNATE" -gt 0 ]; then
    MODES=$(echo $MODES | tr " " "\n" | grep -vx paced | tr "\n" " ")
    ALT_FLAGS="--snapshot-alternate $ALTERNATE"
    FIRST=""
else
    ALT_FLAGS=""
    FIRST=none
fi
REPEAT=${REPEAT:-3}
STEPS=${STEPS:-12}
INTER_RATE=${INTER_RATE:-1gbit}
MODEL=${MODEL:---ctx 8 --emb 32 --hidden 1024 --blocks 4 --batch 2048 --micro-steps 1}

if ! "$CLUSTER" --check >/dev/null 2>&1; then
    echo "snapshot_overhead: tacl-cluster cannot run here (root and" \
        "namespaces needed)" >&2
    exit 77
fi
[ -x "$TRAIN" ] || { echo "snapshot_overhead: no $TRAIN" >&2; exit 2; }
work=$(mktemp -d /tmp/tacl-snap-overhead.XXXXXX) || exit 1
trap 'rm -rf "$work"; rm -f /dev/shm/tacl-snap-sov$$-*' EXIT
mkdir -p "$out"
rm -f "$out"/*.log
for layout in $LAYOUTS; do
    nodes=${layout%x*} per=${layout#*x}
    for rep in $(seq 1 "$REPEAT"); do
        echo "snapshot_overhead: $layout launch $rep of $REPEAT" >&2
        dir="$work/$layout.$rep"
        mkdir -p "$dir"
        # Even launches run the modes in the reverse order, so that a
        # drift of the machine over a launch does not favour one mode.
        order="$FIRST $MODES"
        [ $((rep % 2)) -eq 0 ] &&
            order=$(echo $order | tr " " "\n" | tac | tr "\n" " ")
        # shellcheck disable=SC2016
        "$CLUSTER" --nodes "$nodes" --ranks-per-node "$per" \
            --inter-rate "$INTER_RATE" --timeout 1800 -- sh -c '
            dir=$1 key=$2; shift 2
            for st in '"$STRATEGIES"'; do
                for mode in '"$order"'; do
                    flags="--strategy $st"
                    case $mode in
                    none) ;;
                    paced) flags="$flags --snapshot-every 1 \
                        --snapshot-pace 0 --snapshot-key $key-$st-$mode" ;;
                    unpipelined) flags="$flags --snapshot-every 1 \
                        --snapshot-parts 1 --snapshot-key $key-$st-$mode" ;;
                    pipelined) flags="$flags --snapshot-every 1 \
                        --snapshot-parts 4 --snapshot-key $key-$st-$mode" ;;
                    own) flags="$flags --snapshot-every 1 \
                        --snapshot-replicas 1 --snapshot-key $key-$st-$mode" ;;
                    sendall) flags="$flags --snapshot-every 1 \
                        --snapshot-send-all --snapshot-key $key-$st-$mode" ;;
                    *) flags="$flags --snapshot-every 1 \
                        --snapshot-mode $mode --snapshot-key $key-$st-$mode"
                    esac
                    [ "$mode" = none ] || flags="$flags '"$ALT_FLAGS"'"
                    "$@" $flags > "$dir/$st.$mode.$TACL_RANK" 2>&1 || exit 1
                done
            done' sh "$dir" "sov$$-$rep" "$TRAIN" $MODEL --steps "$STEPS" \
            --quiet > "$dir/job.log" 2>&1 ||
            { echo "snapshot_overhead: $layout launch $rep failed" >&2;
              tail -5 "$dir/job.log" >&2; }
        for st in $STRATEGIES; do
            for mode in $FIRST $MODES; do
                cp "$dir/$st.$mode.0" "$out/$layout.$rep.$st.$mode.log" \
                    2>/dev/null
            done
        done
    done
done
/usr/bin/python3 - "$out" "$LAYOUTS" "$STRATEGIES" "$FIRST $MODES" \
    "$ALTERNATE" <<'EOF' |
import statistics, sys
out, layouts, strategies, modes = sys.argv[1], *[a.split() for a in sys.argv[2:5]]
alternate = int(sys.argv[5])


def launches(lay, st, mode):
    """Each launch's rank 0 log of a configuration, as lists of fields."""
    for rep in range(1, 100):
        try:
            text = open(f"{out}/{lay}.{rep}.{st}.{mode}.log").read()
        except OSError:
            return
        yield [line.split() for line in text.splitlines() if line.split()]


def alternate_table():
    """Per mode: each run's steps with a save against those without."""
    print("| layout | strategy | snapshots | launches | step time with a "
          "save / without (median of runs' median ratios) | range | "
          "mean-time ratio (median) | CPU ms a step with / without | "
          "transfer ms a save |")
    print("|---|---|---|---|---|---|---|---|---|")
    for lay in layouts:
        for st in strategies:
            for mode in modes:
                runs = []
                for lines in launches(lay, st, mode):
                    alt = [dict(zip(f[1::2], map(float, f[2::2])))
                           for f in lines if f[0] == "alternate"]
                    snap = [dict(zip(f[1::2], f[2::2]))
                            for f in lines if f[0] == "snapshots"]
                    if alt and snap:
                        a = alt[0]
                        a["xfer"] = (float(snap[0]["total_transfer_s"]) /
                                     max(1, int(snap[0]["saved"])))
                        runs.append(a)
                if not runs:
                    print(f"| {lay} | {st} | {mode} | 0 |" + " - |" * 5)
                    continue

                def med(key, scale=1.0):
                    return statistics.median(r[key] for r in runs) * scale
                ratios = [r["median_ratio"] for r in runs]
                print(f"| {lay} | {st} | {mode} | {len(runs)} | "
                      f"**{med('median_ratio'):.3f}** | "
                      f"{min(ratios):.3f}-{max(ratios):.3f} | "
                      f"{med('mean_ratio'):.3f} | "
                      f"{med('cpu_with_s', 1e3):.0f} / "
                      f"{med('cpu_without_s', 1e3):.0f} | "
                      f"{med('xfer', 1e3):.0f} |")


def plan_table():
    """The scheduled copies' plan (Algorithm 6.2 on the idle spans rank 0
    watched): medians over the launches."""
    plans = []
    for lay in layouts:
        for st in strategies:
            for mode in modes:
                runs = [dict(zip(f[1::2], f[2::2]))
                        for lines in launches(lay, st, mode)
                        for f in lines if f[0] == "snapshots"]
                runs = [r for r in runs if int(r.get("plan_spans", 0)) > 0]
                if not runs:
                    continue
                med = lambda k: statistics.median(float(r[k]) for r in runs)
                plans.append(f"| {lay} | {st} | {mode} | {len(runs)} | "
                             f"{med('plan_spans'):g} | "
                             f"{med('plan_step_s') * 1e3:.1f} | "
                             f"{med('plan_idle_s') * 1e3:.1f} | "
                             f"{med('plan_idle_s') / med('plan_step_s'):.2f}"
                             f" | {med('plan_beyond_bytes') * 1e-6:.2f} |")
    if plans:
        print()
        print("| layout | strategy | snapshots | launches | idle spans | "
              "step ms | idle ms | idle share | beyond MB |")
        print("|---|---|---|---|---|---|---|---|---|")
        print("\n".join(plans))


if alternate:
    alternate_table()
    plan_table()
    sys.exit(0)

print("| layout | strategy | snapshots | tokens/s (median) | launches | "
      "step time / none | steady step time / none, paired | "
      "saves made (median) |")
print("|---|---|---|---|---|---|---|---|")


def steady(lay, st, mode):
    """Per launch, the steady rate (steps after the first), or None."""
    out = []
    for lines in launches(lay, st, mode):
        got = [float(f[f.index("steady_tokens/s") + 1]) for f in lines
               if f[0] == "summary" and "steady_tokens/s" in f]
        out.append(got[0] if got else None)
    return out
for lay in layouts:
    for st in strategies:
        base = None
        for mode in modes:
            rates, saves = [], []
            for lines in launches(lay, st, mode):
                for f in lines:
                    if f[0] == "summary":
                        rates.append(float(f[f.index("tokens/s") + 1]))
                    if f[0] == "snapshots":
                        saves.append(int(f[2]))
            if not rates:
                print(f"| {lay} | {st} | {mode} | - | 0 | - | - |")
                continue
            med = statistics.median(rates)
            if mode == "none":
                base = med
            ratio = f"{base / med:.3f}" if base else "-"
            made = f"{statistics.median(saves):g}" if saves else "-"
            # Each launch's own ratio (the same launch's none against this
            # mode, run minutes apart at most), then their median.
            pairs = [n / m for n, m in zip(steady(lay, st, "none"),
                                           steady(lay, st, mode))
                     if n and m]
            paired = (f"{statistics.median(pairs):.3f} "
                      f"({min(pairs):.3f}-{max(pairs):.3f})"
                      if pairs else "-")
            print(f"| {lay} | {st} | {mode} | {med:.1f} | {len(rates)} | "
                  f"{ratio} | {paired} | {made} |")

# The breakdown: per save, the medians over the launches of the means.
cols = [("pack ms", "total_pack_s", 1e3), ("save ms", "total_save_s", 1e3),
        ("agree ms", "total_agree_s", 1e3),
        ("copy ms", "total_copy_s", 1e3), ("checksum ms", "total_crc_s", 1e3),
        ("transfer ms", "total_transfer_s", 1e3),
        ("sent MB", "total_sent_bytes", 1e-6)]
print()
print("| layout | strategy | snapshots | saves | " +
      " | ".join(c[0] for c in cols) + " |")
print("|---|---|---|---|" + "---|" * len(cols))
for lay in layouts:
    for st in strategies:
        for mode in [m for m in modes if m != "none"]:
            runs = [dict(zip(f[1::2], f[2::2]))
                    for lines in launches(lay, st, mode)
                    for f in lines if f[0] == "snapshots"]
            runs = [r for r in runs
                    if "total_save_s" in r and int(r["saved"]) > 0]
            if not runs:
                print(f"| {lay} | {st} | {mode} | 0 |" + " - |" * len(cols))
                continue
            saves = statistics.median(int(r["saved"]) for r in runs)
            cells = [statistics.median(float(r[k]) / int(r["saved"])
                                       for r in runs) * scale
                     for _, k, scale in cols]
            print(f"| {lay} | {st} | {mode} | {saves:g} | " +
                  " | ".join(f"{c:.2f}" for c in cells) + " |")
plan_table()

EOF
    tee "$out/snapshot_overhead.md"
