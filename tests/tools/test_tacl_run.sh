#!/bin/sh
# Tests of the tacl-run launcher: the environment each rank sees, exit-code
# propagation, stopping the other ranks when one fails (or not, with
# --keep-going), --timeout, signal
# forwarding, --tag and bad command lines.
#
# Usage: test_tacl_run.sh PATH_TO_TACL_RUN

RUN=${1:?usage: test_tacl_run.sh PATH_TO_TACL_RUN}
TMP=$(mktemp -d) || exit 1
trap 'rm -rf "$TMP"' EXIT
. "$(dirname "$0")/../common/checks.sh"

now() {
    date +%s
}

# expect_took WHAT MIN MAX: one check, that WHAT took MIN to MAX seconds
# since t0.
expect_took() {
    took=$(($(now) - t0))
    checks=$((checks + 1))
    if [ "$took" -lt "$2" ] || [ "$took" -gt "$3" ]; then
        fail "$1 after $took s, wanted $2 to $3 s"
    else
        ok "$1 after $took s"
    fi
}

# 1. Every rank sees its own rank and the shared launch description.
show='echo "$TACL_RANK $TACL_NRANKS $TACL_LOCAL_RANK $TACL_LOCAL_SIZE $RANK'
show="$show"' $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $TACL_ROOT_ADDR'
show="$show"' $MASTER_ADDR:$MASTER_PORT"'
"$RUN" -n 3 sh -c "$show" > "$TMP/env" 2>&1
expect_rc "env run" 0 $?
checks=$((checks + 1))
sort "$TMP/env" > "$TMP/env.sorted"
addr=$(awk 'NR == 1 { print $9 }' "$TMP/env.sorted")
case "$addr" in
127.0.0.1:[0-9]*) ;;
*) fail "TACL_ROOT_ADDR is '$addr', wanted 127.0.0.1:PORT" ;;
esac
port=${addr#127.0.0.1:}
if [ "$port" -le 0 ] 2>/dev/null || [ "$port" -gt 65535 ]; then
    fail "port '$port' out of range"
fi
printf '%s\n' "0 3 0 3 0 3 0 3 $addr $addr" "1 3 1 3 1 3 1 3 $addr $addr" \
    "2 3 2 3 2 3 2 3 $addr $addr" > "$TMP/env.want"
if cmp -s "$TMP/env.sorted" "$TMP/env.want"; then
    echo "ok: environment of 3 ranks"
else
    fail "environment differs from what was wanted:"
    diff "$TMP/env.want" "$TMP/env.sorted"
fi

# 2. The launcher sets the variables even when the caller had set them.
TACL_RANK=99 RANK=99 "$RUN" -n 1 sh -c 'echo "$TACL_RANK $RANK"' \
    > "$TMP/over" 2>&1
checks=$((checks + 1))
if [ "$(cat "$TMP/over")" = "0 0" ]; then
    echo "ok: launch variables override the caller's"
else
    fail "stale variables: '$(cat "$TMP/over")'"
fi

# 3. Exit codes.
"$RUN" -n 4 true
expect_rc "all ranks succeed" 0 $?
"$RUN" -n 3 -- sh -c '[ "$TACL_RANK" = 1 ] && exit 7; exit 0' 2>/dev/null
expect_rc "rank 1 exits 7" 7 $?
"$RUN" -n 2 sh -c '[ "$TACL_RANK" = 0 ] && kill -KILL $$; exit 0' \
    2>/dev/null
expect_rc "rank 0 killed by SIGKILL" 137 $?
"$RUN" -n 1 ./this-command-does-not-exist-tacl 2>/dev/null
expect_rc "command not found" 127 $?

# 4. A failing rank stops the others (which would sleep for 60 s).
t0=$(now)
"$RUN" -n 3 sh -c '[ "$TACL_RANK" = 2 ] && exit 3; sleep 60' 2>/dev/null
expect_rc "kill on failure" 3 $?
expect_took "the other ranks stopped" 0 10

# 4b. --keep-going: a killed rank stops nobody; the survivors finish and
# tacl-run still exits with the first failure's code.
"$RUN" -n 3 --keep-going sh -c '[ "$TACL_RANK" = 0 ] && kill -KILL $$
    sleep 1; echo "$TACL_RANK" >>"'"$TMP"'/kept"' 2>/dev/null
expect_rc "keep going after a SIGKILL" 137 $?
checks=$((checks + 1))
if [ "$(sort "$TMP/kept" 2>/dev/null | tr '\n' ' ')" != "1 2 " ]; then
    fail "--keep-going: survivors wrote '$(cat "$TMP/kept" 2>/dev/null)'"
else
    echo "ok: --keep-going let ranks 1 and 2 finish"
fi

# 5. A rank that ignores SIGTERM gets SIGKILL after the grace period.
t0=$(now)
"$RUN" -n 2 sh -c '[ "$TACL_RANK" = 1 ] && { sleep 1; exit 5; }
    trap "" TERM; sleep 60' 2>/dev/null
expect_rc "SIGKILL after grace period" 5 $?
expect_took "the stubborn rank was killed (about 3 s)" 3 12

# 6. --timeout.
t0=$(now)
"$RUN" --timeout 1 -n 2 sleep 60 2>/dev/null
expect_rc "timeout" 124 $?
expect_took "the timeout stopped the ranks" 0 8

# 7. SIGTERM to the launcher reaches the ranks.
"$RUN" -n 2 sh -c 'trap "echo got-term-\$TACL_RANK; exit 0" TERM; sleep 60 & wait' \
    > "$TMP/term" 2>&1 &
pid=$!
sleep 2
kill -TERM $pid
wait $pid
expect_rc "SIGTERM to the launcher" 143 $?
checks=$((checks + 1))
# Each rank must see it; a rank may see it twice (the launcher forwards
# SIGTERM and may stop what is left the same way) before its shell exits.
if grep -q got-term-0 "$TMP/term" && grep -q got-term-1 "$TMP/term"; then
    echo "ok: both ranks saw SIGTERM"
else
    fail "ranks did not see SIGTERM: '$(cat "$TMP/term")'"
fi

# 8. --tag prefixes each line of stdout and stderr with the rank.
"$RUN" --tag -n 2 sh -c 'echo "out $TACL_RANK"; echo "err $TACL_RANK" >&2;
    printf "partial"' > "$TMP/tag" 2>&1
expect_rc "tagged run" 0 $?
checks=$((checks + 1))
sort "$TMP/tag" > "$TMP/tag.sorted"
printf '%s\n' "[0] err 0" "[0] out 0" "[0] partial" "[1] err 1" \
    "[1] out 1" "[1] partial" | sort > "$TMP/tag.want"
if cmp -s "$TMP/tag.sorted" "$TMP/tag.want"; then
    echo "ok: --tag output"
else
    fail "--tag output differs:"
    diff "$TMP/tag.want" "$TMP/tag.sorted"
fi

# 9. Bad command lines exit 2 with a usage message.
for args in "" "-n" "-n 0 true" "-n x true" "-n 2" "--bogus -n 2 true" \
    "-n 2 --timeout -1 true"; do
    # shellcheck disable=SC2086
    "$RUN" $args > "$TMP/usage" 2>&1
    expect_rc "bad command line '$args'" 2 $?
    checks=$((checks + 1))
    if ! grep -q "usage: tacl-run" "$TMP/usage"; then
        fail "no usage message for '$args'"
    fi
done

# 10. A bad number is refused with a message naming the flag, the value
# and what is wrong with it.
"$RUN" -n 2x true > "$TMP/bad" 2>&1
expect_rc "rank count 2x" 2 $?
expect_line "rank count 2x named" "$TMP/bad" \
    "tacl-run: bad value '2x' for -n: unexpected characters after the number"
"$RUN" -n 2 --timeout=-1 true > "$TMP/bad" 2>&1
expect_rc "timeout -1" 2 $?
expect_line "timeout -1 named" "$TMP/bad" \
    "tacl-run: bad value '-1' for --timeout: negative values are not allowed"

finish
