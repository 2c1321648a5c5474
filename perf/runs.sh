# Shell functions the comparison scripts share (sourced, not run): whether
# the MPI side can run, reading the one row of an nccl-tests-style run,
# the median of several runs, a run whose failure is told and counted,
# and the callgrind scripts' 2-rank launch.  median_row reads REPEAT from
# the caller; logged_run sets the caller's status.

# Out-of-place and in-place busbw and time of the one row of a run's
# output: "oop_busbw oop_time ip_busbw ip_time wrong" or "- - - - -".
row_of() {
    awk '!/^#/ && NF >= 13 {
            print $8, $6, $12, $10, $9 + $13; found = 1; exit }
         END { if (!found) print "- - - - -" }' "$1"
}

# The row of the median run (by out-of-place busbw) of PREFIX.1 ..
# PREFIX.REPEAT; runs that printed no row are left out, and the wrong
# counts of all runs are summed so that no wrong result hides.
median_row() {
    rep=1
    while [ $rep -le "$REPEAT" ]; do
        row_of "$1.$rep"
        rep=$((rep + 1))
    done | awk '
        $5 != "-" { wrong += $5 }
        $1 != "-" {
            for (i = n; i > 0 && bw[i] > $1 + 0; i--) {
                bw[i + 1] = bw[i]; row[i + 1] = row[i]
            }
            bw[i + 1] = $1 + 0; row[i + 1] = $0; n++
        }
        END {
            if (n == 0) { print "- - - - -"; exit }
            split(row[int((n + 1) / 2)], f, " ")
            print f[1], f[2], f[3], f[4], wrong + 0
        }'
}

# logged_run SCRIPT WHAT OUT COMMAND [ARGS...]: COMMAND with its output
# in OUT; when it fails, "SCRIPT: WHAT failed:" and the last lines of OUT
# go to stderr and status becomes 1.
logged_run() {
    lr_script=$1 lr_what=$2 lr_out=$3
    shift 3
    if ! "$@" > "$lr_out" 2>&1; then
        echo "$lr_script: $lr_what failed:" >&2
        tail -5 "$lr_out" >&2
        status=1
    fi
}

# have_mpi_of SCRIPT EXE: 1 when EXE (the MPI side) and mpirun exist, else 0
# with a note on stderr that SCRIPT prints tacl figures only.
have_mpi_of() {
    if [ -x "$2" ] && command -v mpirun > /dev/null; then
        echo 1
    else
        echo "$1: no $(basename "$2") or mpirun: tacl figures only" >&2
        echo 0
    fi
}

# cg_rank0 BUILD CGOUT LOG PROGRAM [ARGS...]: PROGRAM on 2 ranks under
# BUILD's tacl-run, rank 0 under valgrind's callgrind writing CGOUT (with
# the options in CG_OPTS, if set), rank 1 natively; both ranks' output to
# LOG.  Its status is the launch's.
cg_rank0() {
    cg_build=$1 cg_out=$2 cg_log=$3
    shift 3
    CG_OPTS=${CG_OPTS:-}
    export CG_OPTS
    # shellcheck disable=SC2016
    "$cg_build/tools/tacl-run" --timeout 600 -n 2 sh -c '
        if [ "$TACL_RANK" = 0 ]; then
            # shellcheck disable=SC2086 # options split on purpose
            exec valgrind --tool=callgrind --callgrind-out-file="$0" \
                $CG_OPTS "$@" 2> /dev/null
        fi
        exec "$@"' "$cg_out" "$@" > "$cg_log" 2>&1
}
