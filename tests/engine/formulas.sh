# PaRO's formulas and the checks the engine's tests share; they source this.
#
# Table 2 (memory per rank) in float32: parameters 4 bytes per element,
# gradients 4, Adam's two moments 8 (K = 8; float32 training keeps no
# separate master copy), each divided by 1, M or N for the levels N, I, G;
# ZeRO++'s hpZ adds its secondary partition, 4 Psi / M, to the parameters.
#
# Table 3 (bytes per step, all ranks summed) for ring algorithms (the
# tests force them with TACL_ALGO): a ring all-gather or reduce-scatter on
# k ranks sends (k - 1) / k of the region from every rank, an all-reduce
# twice that.  On the world ring of g node-contiguous groups, g of the N
# ring links cross groups.  The strategy's collectives (see
# docs/design/engine.md):
#   parameters  I: group all-gather before forward and before backward,
#               s times; G: the world all-gather (two hops, inter then
#               group, when the strategy has an I level elsewhere).
#   gradients   I: group reduce-scatter s times; G: world reduce-scatter
#               (or the two hops) s times.
#   update      gradients from their level to the states' level once
#               (to N: world all-reduce; to I: group reduce-scatter when
#               unsharded, then an all-reduce across groups, MiCS's second
#               hop), and parameters back from the states' level.
# They are Table 3's entries for ZeRO-2, ZeRO-3, PaRO-IIG, PaRO-NIG and
# ZeRO++; the others differ from Table 3 where the table is inconsistent
# with its own text: ZeRO-1 reduce-scatters instead of all-reducing (only
# the owned shard is used), and MiCS's and IGG's cross-group terms are
# (g - 1) / g of the group shard per rank, not (g - 1) times it.

# paro_memory STRATEGY N M PSI HPZ: prints "P G OS" bytes of one rank.
paro_memory() {
    awk -v s="$1" -v n="$2" -v m="$3" -v psi="$4" -v hpz="$5" 'BEGIN {
        split(s, c, "");
        for (i = 1; i <= 3; i++)
            d[i] = c[i] == "N" ? 1 : c[i] == "I" ? m : n;
        p = 4 * psi / d[1] + (hpz ? 4 * psi / m : 0);
        printf "%d %d %d\n", p, 4 * psi / d[2], 8 * psi / d[3];
    }'
}

# paro_bytes STRATEGY N M S PSI HPZ: prints "INTRA INTER" bytes of a step.
paro_bytes() {
    awk -v st="$1" -v n="$2" -v m="$3" -v s="$4" -v psi="$5" -v hpz="$6" '
    function world(times) {
        if (g > 1) {
            inter += times * g * (n - 1) * b / n;
            intra += times * (n - g) * (n - 1) * b / n;
        } else {
            intra += times * (n - 1) * b;
        }
    }
    function group(times) { intra += times * n * (m - 1) * b / m; }
    function across(times) { inter += times * (g - 1) * b; }
    # One move between levels (from < to: reduce; any order: same bytes).
    function move(lo, hi, times) {
        if (lo == hi) return;
        if (lo == 0 && hi == 2 && !nested) { world(times); return; }
        if (lo == 0) group(times);
        if (hi == 2) across(times);
    }
    BEGIN {
        g = n / m; b = 4 * psi; intra = 0; inter = 0;
        split(st, c, "");
        for (i = 1; i <= 3; i++) lv[i] = c[i] == "N" ? 0 : c[i] == "I" ? 1 : 2;
        nested = lv[1] == 1 || lv[2] == 1 || lv[3] == 1;
        if (hpz) { world(s); group(s); }
        else move(0, lv[1], 2 * s);
        move(0, lv[2], s);
        if (lv[3] == 0) world(2);
        else if (lv[3] == 1) { move(lv[2], 1, 1); across(2); }
        else move(lv[2], 2, 1);
        move(lv[1], lv[3], 1);
        printf "%.0f %.0f\n", intra, inter;
    }'
}

ALL_STRATEGIES="NNN NNI NNG NII NIG NGG INI ING III IIG IGG GNG GIG GGG"
RING_ALGO=allgather=ring,reducescatter=ring,allreduce=ring

# losses_of LOG: the loss of every step, one per line.
losses_of() {
    awk '$1 == "step" { print $4 }' "$1"
}

# close_losses WANT GOT REL: succeeds when both lists have the same
# length and every pair agrees within REL (relative); prints the worst.
close_losses() {
    paste "$1" "$2" | awk -v rel="$3" '
        NF != 2 { bad = 1 }
        NF == 2 { d = $1 - $2; if (d < 0) d = -d; r = d / ($1 < 0 ? -$1 : $1);
                  if (r > worst) worst = r; n++ }
        END { printf "worst relative difference %.3g over %d steps\n", worst, n;
              exit (bad || n == 0 || worst > rel) }'
}

# expect_close NAME WANT GOT REL [WHAT]: one check, that loss lists WANT
# and GOT agree within REL (close_losses); WHAT names WANT's run
# (single-process training).
expect_close() {
    local out what=${5:-single-process training}
    checks=$((checks + 1))
    if out=$(close_losses "$2" "$3" "$4"); then
        ok "$1: losses within $4 of $what ($out)"
    else
        fail "$1: losses differ from $what's by more than $4 ($out)"
        paste "$2" "$3" | head -25
        return 1
    fi
}

# check_run NAME LOG STRATEGY N M S HPZ: the state bytes of every rank and
# the bytes of every step against the formulas.
check_run() {
    local name=$1 log=$2 st=$3 n=$4 m=$5 s=$6 hpz=$7 psi want got
    psi=$(awk '$1 == "train:" { for (i = 1; i < NF; i++)
        if ($i == "psi") print $(i + 1) }' "$log" | head -1)
    checks=$((checks + 1))
    want=$(paro_memory "$st" "$n" "$m" "$psi" "$hpz")
    got=$(awk '$1 == "state" { print $5, $7, $9 }' "$log" | sort -u)
    if [ -z "$psi" ] || [ "$(awk '$1 == "state"' "$log" | wc -l)" -ne "$n" ] ||
        [ "$got" != "$want" ]; then
        fail "$name: state bytes per rank '$got', Table 2 says '$want'" \
            "(psi $psi)"
    else
        ok "$name: state bytes $want (P G OS) on every rank, as Table 2"
    fi
    checks=$((checks + 1))
    want=$(paro_bytes "$st" "$n" "$m" "$s" "$psi" "$hpz")
    got=$(awk '$1 == "step" { print $10, $12 }' "$log" | sort -u)
    if [ "$got" != "$want" ]; then
        fail "$name: intra/inter bytes per step '$got', formula '$want'"
    else
        ok "$name: intra/inter-group bytes per step $want, as the formula"
    fi
}

# bad NAME WANT_RC PATTERN CMD...: a clear message and status, no crash.
bad() {
    local name=$1 want=$2 pat=$3 rc
    shift 3
    "$@" > "$TMP/bad.log" 2>&1
    rc=$?
    checks=$((checks + 1))
    if [ "$rc" -ne "$want" ] || ! grep -q -- "$pat" "$TMP/bad.log"; then
        fail "$name: exit $rc (want $want), output:"
        head -5 "$TMP/bad.log"
    else
        ok "$name: exit $rc, says '$pat'"
    fi
}

# The word embedding's runs (train --vocab): test_engine_words.sh and
# test_engine_cluster.sh.

# bits_of LOG: the step lines' loss bits, one a line.
bits_of() {
    awk '$1 == "step" { print $14 }' "$1"
}

# sums_of LOG: the ranks' table checksums, distinct, one a line.
sums_of() {
    awk '$1 == "words" && $2 == "rank" { print $5 }' "$1" | sort -u
}

# replicas_agree NAME LOG N: N ranks printed a checksum, all the same.
replicas_agree() {
    local n
    checks=$((checks + 1))
    n=$(grep -c '^words rank' "$2")
    if [ "$n" -eq "$3" ] && [ "$(sums_of "$2" | wc -l)" -eq 1 ]; then
        ok "$1: the $3 ranks' tables agree ($(sums_of "$2"))"
    else
        fail "$1: $n of $3 checksums, distinct: $(sums_of "$2" | xargs)"
    fi
}

# same_bits NAME A B: two runs' losses and tables are bit for bit equal.
same_bits() {
    checks=$((checks + 1))
    if [ -n "$(bits_of "$2")" ] && cmp -s <(bits_of "$2") <(bits_of "$3") &&
       [ "$(sums_of "$2")" = "$(sums_of "$3")" ]; then
        ok "$1: losses and tables bit for bit equal"
    else
        fail "$1: losses or tables differ"
        paste <(bits_of "$2") <(bits_of "$3") | head -5
    fi
}

# engine_test_setup: TMP, a folder removed at exit, and DATA, the training
# text (ENGINE_DATA or Debian's GPL-3); without the text the test skips.
engine_test_setup() {
    TMP=$(mktemp -d) || exit 1
    trap 'rm -rf "$TMP"' EXIT
    DATA=${ENGINE_DATA:-/usr/share/common-licenses/GPL-3}
    if [ ! -r "$DATA" ]; then
        echo "SKIP: the training text $DATA (Debian's base-files) is missing"
        exit 77
    fi
}
