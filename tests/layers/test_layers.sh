#!/bin/sh
# Nothing calls upward: every tacl symbol a layer's library leaves
# undefined must be defined by that library or by a layer it may use.
# (The include paths already stop a wrong-way #include at compile time;
# this catches a call through a hand-written prototype.)
#
# Usage: test_layers.sh NM LAYER=LIB[:ALLOWED,...] ...
#   e.g. executor=path/libtacl_executor.a:core,kernels,transport
NM=${1:?usage: test_layers.sh NM LAYER=LIB[:ALLOWED,...] ...}
shift
TMP=$(mktemp -d) || exit 1
trap 'rm -rf "$TMP"' EXIT

# Defined symbols of each layer first, so any order of arguments works.
for spec in "$@"; do
    name=${spec%%=*}
    rest=${spec#*=}
    lib=${rest%%:*}
    "$NM" --defined-only -g "$lib" 2> /dev/null |
        awk 'NF == 3 { print $3 }' | sort -u >> "$TMP/def.$name"
done

failures=0
for spec in "$@"; do
    name=${spec%%=*}
    rest=${spec#*=}
    lib=${rest%%:*}
    allowed=
    case $rest in *:*) allowed=$(echo "${rest#*:}" | tr ',' ' ') ;; esac
    cat "$TMP/def.$name" > "$TMP/ok"
    for a in $allowed; do
        if [ ! -f "$TMP/def.$a" ]; then
            echo "FAIL: $name may use $a, which is not a layer given" >&2
            failures=$((failures + 1))
            continue
        fi
        cat "$TMP/def.$a" >> "$TMP/ok"
    done
    sort -u "$TMP/ok" -o "$TMP/ok"
    "$NM" -u "$lib" | awk '{ print $NF }' | grep '^tacl' | sort -u \
        > "$TMP/undef"
    comm -23 "$TMP/undef" "$TMP/ok" > "$TMP/bad"
    if [ -s "$TMP/bad" ]; then
        for s in $(cat "$TMP/bad"); do
            who=
            for other in "$TMP"/def.*; do
                grep -qx "$s" "$other" && who="$who ${other##*/def.}"
            done
            echo "FAIL: $name calls $s, defined in:${who:- nothing built}"
        done
        failures=$((failures + 1))
    else
        echo "ok: $name uses only itself${allowed:+ and $allowed}"
    fi
done
[ "$failures" -eq 0 ]
