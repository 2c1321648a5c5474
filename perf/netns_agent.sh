#!/bin/sh
# netns_agent.sh HOST CMD...: mpirun's launch agent (--mca plm_rsh_agent)
# between tacl-cluster's emulated nodes, where ssh cannot go: it runs CMD
# (joined into one shell command, as ssh would) with `ip netns exec` in
# the network namespace of the node whose address is HOST.
#
# Called from inside one node (report.sh starts mpirun on node 0), it
# finds its own namespace with `ip netns identify` and looks for HOST
# among the namespaces of the same run (tacl-cluster names them
# tacl-<run>-n<i>), so concurrent runs, which reuse the same addresses,
# never mix.  CMD also gets its own UTS, IPC and mount namespaces, with
# the node's host name (this node's, its number replaced) and a private
# /dev/shm: Open MPI names its shared-memory segments after the host, so
# two nodes must never share either.  The daemons stay in node 0's
# process namespace: when node 0 ends, they end with it.
set -u
if [ $# -lt 2 ]; then
    echo "usage: netns_agent.sh HOST CMD..." >&2
    exit 2
fi
host=$1
shift
self=$(ip netns identify $$ 2> /dev/null)
case $self in
tacl-*-n[0-9]*) prefix=${self%-n*} ;;
*)
    echo "netns_agent.sh: not inside a tacl-cluster node (namespace" \
        "'$self')" >&2
    exit 255
    ;;
esac
for ns in $(ip netns list 2> /dev/null | awk '{print $1}'); do
    case $ns in
    "$prefix"-n[0-9]*) ;;
    *) continue ;;
    esac
    if ip -n "$ns" -4 -o addr show 2> /dev/null |
        awk '{ sub(/\/.*/, "", $4); print $4 }' | grep -qx "$host"; then
        name=$(hostname)
        name=${name%"${name##*[!0-9]}"}${ns##*-n}
        # shellcheck disable=SC2016
        exec ip netns exec "$ns" unshare --uts --ipc --mount \
            --propagation private sh -c 'hostname "$1" &&
                mount -t tmpfs tmpfs /dev/shm && exec sh -c "$2"' \
            netns_agent "$name" "$*"
    fi
done
echo "netns_agent.sh: no node of $prefix has address $host" >&2
exit 255
