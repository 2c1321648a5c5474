#!/bin/bash
# Counted fault trials (issue 18): each trial runs 4 ranks of fault_rank
# looping on checked 1 MB all-reduces and injects one fault:
#   kill     the victim SIGKILLs itself with an all-reduce pending
#   stop     the victim SIGSTOPs itself (survivors must time out)
#   thread   a second thread of the victim aborts during a call
#   pending  the victim aborts with a request pending
#   cut      (tacl-cluster, 2 nodes x 2 ranks) node 1's link goes down
#   flap     (tacl-cluster) node 1's link goes down for FLAP_S seconds
# For each kind it prints the trials, crashes (a rank other than a killed
# victim dying of a signal, or a broken contract, exit 3), hangs (the
# launcher's timeout), survivors whose error names the failed rank (for a
# flap: ranks whose all-reduces all completed) and the time from the
# fault to each survivor's error: min / median / max.
#
# Usage: fault_trials.sh BUILD_DIR
# Counts: KILLS=50 STOPS=20 THREADS=20 PENDINGS=20 CUTS=10 FLAPS=10
# (0 skips a kind; cut and flap need root and namespaces, else skipped).
# FAULT_NET=ucx|ofi runs the kill, stop, thread and pending trials inside
# tacl-cluster too (2 nodes x 2 ranks: the victim, rank 3, reaches ranks
# 0 and 1 over that network transport) and the cut and flap trials over
# it; unset, those four run on one node (tacl-run) and cut and flap over
# the default choice (TACL_NET=auto).
# TACL_TIMEOUT defaults to 3 s here (10 s, FLAP_TIMEOUT, for the flaps),
# FLAP_S to 2; a flap trial runs FLAP_RUN_S (20) seconds of all-reduces.
set -u
BUILD=${1:?usage: fault_trials.sh BUILD_DIR}
HERE=$(cd "$(dirname "$0")" && pwd)
RANK_BIN=$BUILD/tests/faults/fault_rank
RUN=$BUILD/tools/tacl-run
CLUSTER=$HERE/../../tools/tacl-cluster
export TACL_TIMEOUT=${TACL_TIMEOUT:-3}
export TACL_DEBUG=${TACL_DEBUG:-NONE}
FLAP_S=${FLAP_S:-2}
NET=${FAULT_NET:-}
case $NET in ''|ucx|ofi) ;; *) echo "fault_trials: FAULT_NET must be ucx or ofi, not '$NET'"; exit 2 ;; esac
TMP=$(mktemp -d) || exit 1
trap 'rm -rf "$TMP"' EXIT
status=0

for f in "$RANK_BIN" "$RUN"; do
    [ -x "$f" ] || { echo "fault_trials: $f is missing; build first"; exit 2; }
done

# summarize KIND: read $TMP/KIND.* accumulated by the trials.
summarize() {
    local kind=$1 trials=$2
    local crashes hangs named survivors
    crashes=$(cat "$TMP/$kind.crash" 2> /dev/null | wc -l)
    hangs=$(cat "$TMP/$kind.hang" 2> /dev/null | wc -l)
    named=$(grep -c '^named' "$TMP/$kind.surv" 2> /dev/null)
    survivors=$(cat "$TMP/$kind.surv" 2> /dev/null | wc -l)
    printf '%-8s trials %3d  crashes %d  hangs %d  survivors naming the victim %s/%s' \
        "$kind" "$trials" "$crashes" "$hangs" "${named:-0}" "$survivors"
    if [ -s "$TMP/$kind.delay" ]; then
        sort -g "$TMP/$kind.delay" | awk '
            { v[NR] = $1 }
            END { printf "  fault-to-error min %.3f s median %.3f s max %.3f s\n",
                  v[1], (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2),
                  v[NR] }'
    else
        echo
    fi
    if [ "$crashes" -gt 0 ] || [ "$hangs" -gt 0 ] ||
       [ "${named:-0}" -ne "$survivors" ]; then
        status=1
    fi
}

# judge KIND OUT RC VICTIM_REGEX FAULT_T: classify one trial's output.
# Survivors are the RESULT lines of ranks other than the victim; for
# thread/pending the victim's own result must be an error too.
judge() {
    local kind=$1 out=$2 rc=$3 victim_re=$4 fault_t=$5 victim=$6
    if [ "$rc" = 124 ]; then
        echo "$kind" >> "$TMP/$kind.hang"
        echo "--- $kind hang:"; tail -${HANG_LINES:-5} "$out"
        return
    fi
    if grep -Eq 'exit 3|signal (11|6|7|4|8)|SIGSEGV|SIGABRT|AddressSanitizer' "$out"; then
        echo "$kind" >> "$TMP/$kind.crash"
        echo "--- $kind crash:"; tail -5 "$out"
    fi
    if ! grep -q 'RESULT ' "$out"; then
        echo "$kind no result" >> "$TMP/$kind.crash"
        echo "--- $kind: no rank reported:"; tail -5 "$out"
    fi
    grep -o 'RESULT .*' "$out" | while read -r line; do
        local r st t msg
        r=$(sed -E 's/.*rank=([0-9]+).*/\1/' <<< "$line")
        st=$(sed -E 's/.* status=([^ ]+( [^ ]+)*) t=.*/\1/' <<< "$line")
        t=$(sed -E 's/.* t=([0-9.]+).*/\1/' <<< "$line")
        msg=${line#*msg=}
        if [ "$kind" = flap ]; then
            [ "$st" = ok ] && echo named >> "$TMP/$kind.surv" ||
                { echo "failed" >> "$TMP/$kind.surv"; echo "--- flap: $line"; }
            continue
        fi
        [ "$r" = "$victim" ] && [ "$kind" != thread ] &&
            [ "$kind" != pending ] && continue
        if [ "$r" = "$victim" ]; then
            [ "$st" != ok ] || echo "$kind victim ok" >> "$TMP/$kind.crash"
            continue
        fi
        local re=$victim_re
        # A cut: node 0 (ranks 0, 1) must name node 1's ranks, and back.
        [ "$re" = NODE ] && { [ "$r" -lt 2 ] && re='rank [23]([^0-9]|$)' ||
                              re='rank [01]([^0-9]|$)'; }
        if [ "$st" != ok ] && grep -Eq "$re" <<< "$msg"; then
            echo named >> "$TMP/$kind.surv"
        else
            echo "other" >> "$TMP/$kind.surv"
            echo "--- $kind: rank $r does not name the victim: $line"
        fi
        [ -n "$fault_t" ] && [ "$st" != ok ] &&
            awk -v a="$t" -v b="$fault_t" 'BEGIN { printf "%.6f\n", a - b }' \
                >> "$TMP/$kind.delay"
    done
}

local_trials() {
    local kind=$1 count=$2 out rc fault_t
    if [ -n "$NET" ] && ! "$CLUSTER" --check > /dev/null 2>&1; then
        echo "$kind: skipped (FAULT_NET needs tacl-cluster: root and namespaces)"
        return
    fi
    for ((i = 0; i < count; i++)); do
        out=$TMP/out
        if [ -n "$NET" ]; then
            FAULT_AFTER_MS=$((200 + RANDOM % 400)) FAULT_RUN_S=15 \
                TACL_NET=$NET "$CLUSTER" --nodes 2 --ranks-per-node 2 \
                --no-prefix --timeout 40 -- "$RANK_BIN" "$kind" \
                > "$out" 2>&1
        else
            FAULT_AFTER_MS=$((200 + RANDOM % 400)) FAULT_RUN_S=15 \
                "$RUN" -n 4 --keep-going --timeout 40 -- "$RANK_BIN" \
                "$kind" > "$out" 2>&1
        fi
        rc=$?
        fault_t=$(sed -nE 's/.*FAULT rank=[0-9]+ t=([0-9.]+).*/\1/p' "$out" | head -1)
        judge "$kind" "$out" "$rc" 'rank 3([^0-9]|$)' "$fault_t" 3
    done
    summarize "$kind" "$count"
}

# cluster_trials KIND COUNT: 2 nodes x 2 ranks; node 1 (ranks 2, 3) is cut
# off (cut) or flapped for FLAP_S seconds (flap).
cluster_trials() {
    local kind=$1 count=$2 out rc pid ns fault_t
    if ! "$CLUSTER" --check > /dev/null 2>&1; then
        echo "$kind: skipped (tacl-cluster needs root and namespaces)"
        return
    fi
    for ((i = 0; i < count; i++)); do
        out=$TMP/out
        # A flap must end well within TACL_TIMEOUT: TCP's retransmission
        # backoff resumes a connection up to about twice the outage later.
        TACL_NET=${NET:-auto} TACL_TIMEOUT=$([ "$kind" = flap ] && echo "${FLAP_TIMEOUT:-10}" ||
                       echo "$TACL_TIMEOUT") \
        FAULT_RUN_S=$([ "$kind" = flap ] && echo "${FLAP_RUN_S:-20}" || echo 15) \
            "$CLUSTER" --nodes 2 --ranks-per-node 2 --no-prefix --timeout 60 \
            -- "$RANK_BIN" none > "$out" 2>&1 &
        pid=$!
        # The switch's namespace is tacl-<pid>r<random>-sw; wait for it,
        # then 3 s more for the job to reach its loop.
        ns=
        for ((w = 0; w < 100 && ${#ns} == 0; w++)); do
            ns=$(ip netns list 2> /dev/null |
                 grep -oE "^tacl-${pid}r[0-9]+-sw" | head -1)
            [ -n "$ns" ] || sleep 0.1
        done
        sleep 3
        fault_t=$EPOCHREALTIME
        ip netns exec "$ns" ip link set n1 down
        if [ "$kind" = flap ]; then
            sleep "$FLAP_S"
            ip netns exec "$ns" ip link set n1 up
        fi
        wait "$pid"
        rc=$?
        judge "$kind" "$out" "$rc" NODE "$fault_t" -1
    done
    summarize "$kind" "$count"
}

echo "fault trials, TACL_TIMEOUT=$TACL_TIMEOUT, network ${NET:-auto (kinds without a cluster: one node)}, $(date -u +%FT%TZ)"
[ "${KILLS:-50}" -gt 0 ] && local_trials kill "${KILLS:-50}"
[ "${STOPS:-20}" -gt 0 ] && local_trials stop "${STOPS:-20}"
[ "${THREADS:-20}" -gt 0 ] && local_trials thread "${THREADS:-20}"
[ "${PENDINGS:-20}" -gt 0 ] && local_trials pending "${PENDINGS:-20}"
[ "${CUTS:-10}" -gt 0 ] && cluster_trials cut "${CUTS:-10}"
[ "${FLAPS:-10}" -gt 0 ] && cluster_trials flap "${FLAPS:-10}"
exit $status
