# Sourced by the engine's benchmarks on the emulated cluster
# (engine_compress.sh, engine_words.sh): what they check and make first.
#
# engine_cluster_setup NAME: exits 77 when tacl-cluster cannot run here,
# 2 without $TRAIN; makes $work under /tmp (the nodes see the host's
# /tmp; removed at exit) and $out, emptied of logs.  Reads CLUSTER,
# TRAIN and out.
engine_cluster_setup() {
    if ! "$CLUSTER" --check > /dev/null 2>&1; then
        echo "$1: tacl-cluster cannot run here (root and namespaces" \
            "needed)" >&2
        exit 77
    fi
    [ -x "$TRAIN" ] || { echo "$1: no $TRAIN (libopenblas-dev?)" >&2
                         exit 2; }
    work=$(mktemp -d "/tmp/tacl-$1.XXXXXX") || exit 1
    # shellcheck disable=SC2064
    trap "rm -rf '$work'" EXIT
    mkdir -p "$out"
    rm -f "$out"/*.log
}
