#!/bin/sh
# tacl_comm_init_env() under each launcher's variables, set by hand the
# way torchrun, mpirun (Open MPI and Hydra) and srun set them: the ranks
# must meet and all-reduce, and a missing variable must be named in the
# error together with the launcher that was guessed.
#
# Usage: test_launch.sh PATH_TO_ALLREDUCE_EXAMPLE
PROG=${1:?usage: test_launch.sh PATH_TO_ALLREDUCE_EXAMPLE}
TMP=$(mktemp -d) || exit 1
holder=
trap '[ -n "$holder" ] && kill $holder 2>/dev/null; rm -rf "$TMP"' EXIT
. "$(dirname "$0")/../common/checks.sh"

# Nothing of the caller's environment may pick the launcher.
for v in $(env | sed -n 's/^\(TACL_[A-Z_]*\|RANK\|WORLD_SIZE\|LOCAL_RANK\|'\
'LOCAL_WORLD_SIZE\|MASTER_ADDR\|MASTER_PORT\|TORCHELASTIC_[A-Z_]*\|'\
'OMPI_[A-Z_]*\|PMI_[A-Z_]*\|PMIX_[A-Z_]*\|MPI_LOCAL[A-Z]*\|'\
'SLURM_[A-Z_]*\)=.*/\1/p'); do
    unset "$v"
done
export TACL_TIMEOUT=20

# A free TCP port on the loopback interface (the kernel picks it).
free_port() {
    /usr/bin/python3 -c 'import socket; s = socket.socket();
s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# run NAME N VARS: start N ranks of PROG; VARS is evaluated per rank with
# $r set to the rank; every rank must print "ok".
run() {
    name=$1 n=$2 vars=$3
    r=0 pids=
    while [ "$r" -lt "$n" ]; do
        eval "env $vars \"\$PROG\"" > "$TMP/$name.$r" 2>&1 &
        pids="$pids $!"
        r=$((r + 1))
    done
    wait $pids
    checks=$((checks + 1))
    good=$(cat "$TMP/$name".* | grep -c ": ok$")
    if [ "$good" -eq "$n" ]; then
        ok "$name: $n ranks met and all-reduced"
    else
        fail "$name: $good of $n ranks ok:"
        cat "$TMP/$name".*
    fi
}

# expect_error NAME TEXT VARS: one rank, which must fail with TEXT.
expect_error() {
    name=$1 text=$2 vars=$3
    eval "env $vars \"\$PROG\"" > "$TMP/$name" 2>&1
    rc=$?
    checks=$((checks + 1))
    if [ "$rc" -ne 0 ] && grep -qF -- "$text" "$TMP/$name"; then
        ok "$name: fails naming \"$text\""
    else
        fail "$name: exit $rc, wanted an error containing \"$text\":"
        cat "$TMP/$name"
    fi
}

# torchrun: its agent's store holds MASTER_PORT while the workers run,
# so tacl must stay off it.  A listener holds the port here.
port=$(free_port)
/usr/bin/python3 -c 'import socket, sys, time; s = socket.socket();
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(); time.sleep(120)' \
    "$port" &
holder=$!
sleep 0.5
run torchrun 3 'RANK=$r WORLD_SIZE=3 LOCAL_RANK=$r LOCAL_WORLD_SIZE=3 \
    GROUP_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    TORCHELASTIC_RUN_ID=test TORCHELASTIC_USE_AGENT_STORE=True'
# Multi-node form: the same variables, rank 0's node named by address.
run torchrun_nodes 4 'RANK=$r WORLD_SIZE=4 LOCAL_RANK=$((r % 2)) \
    LOCAL_WORLD_SIZE=2 GROUP_RANK=$((r / 2)) MASTER_ADDR=localhost \
    MASTER_PORT=$port TORCHELASTIC_RUN_ID=test2'
kill $holder 2>/dev/null
holder=

# Open MPI on one node: loopback, a port from the job id.
run openmpi 3 'OMPI_COMM_WORLD_RANK=$r OMPI_COMM_WORLD_SIZE=3 \
    OMPI_COMM_WORLD_LOCAL_RANK=$r OMPI_COMM_WORLD_LOCAL_SIZE=3 \
    PMIX_NAMESPACE=job$$ PMIX_RANK=$r'
# Open MPI across nodes needs MASTER_ADDR (its port from the job id).
run openmpi_nodes 2 'OMPI_COMM_WORLD_RANK=$r OMPI_COMM_WORLD_SIZE=2 \
    OMPI_COMM_WORLD_LOCAL_RANK=0 OMPI_COMM_WORLD_LOCAL_SIZE=1 \
    OMPI_MCA_ess_base_jobid=$$ MASTER_ADDR=127.0.0.1'
# Hydra (MPICH, Intel MPI).
run hydra 2 'PMI_RANK=$r PMI_SIZE=2 MPI_LOCALRANKID=$r MPI_LOCALNRANKS=2 \
    PMI_JOBID=hydra$$'
# srun: rank 0 on the first node of the step's list.
run slurm 3 'SLURM_PROCID=$r SLURM_NTASKS=3 SLURM_LOCALID=$r \
    SLURM_JOB_ID=$$ SLURM_STEP_ID=0 SLURM_STEP_NODELIST="localhost,n[2-3]"'
# A compressed host list: the first number of the first range.
run slurm_range 2 'SLURM_PROCID=$r SLURM_NTASKS=2 SLURM_LOCALID=$r \
    SLURM_JOB_ID=$$ SLURM_STEP_ID=1 SLURM_JOB_NODELIST="127.0.0.[1-4,7],x"'
# tacl's own variables win over a launcher's.
port=$(free_port)
run tacl_first 2 'TACL_RANK=$r TACL_NRANKS=2 TACL_ROOT_ADDR=127.0.0.1:$port \
    OMPI_COMM_WORLD_RANK=5 OMPI_COMM_WORLD_SIZE=1'

# Failures name the launcher guessed and the variable.
expect_error none "no launcher found" ''
expect_error torchrun_size "launcher torchrun (RANK is set): WORLD_SIZE is not set" \
    'RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=1234'
expect_error torchrun_port "MASTER_PORT is not" \
    'RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1'
expect_error ompi_size "launcher Open MPI (OMPI_COMM_WORLD_RANK is set): OMPI_COMM_WORLD_SIZE is not set" \
    'OMPI_COMM_WORLD_RANK=0'
expect_error ompi_nodes "the ranks span several nodes" \
    'OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=4 OMPI_COMM_WORLD_LOCAL_SIZE=2'
expect_error slurm_bad "SLURM_NTASKS=\"two\" is not a valid count" \
    'SLURM_PROCID=0 SLURM_NTASKS=two'
expect_error slurm_rank "SLURM_PROCID=3 is not below SLURM_NTASKS=2" \
    'SLURM_PROCID=3 SLURM_NTASKS=2'
expect_error slurm_list "is not a host list" \
    'SLURM_PROCID=0 SLURM_NTASKS=2 SLURM_STEP_NODELIST="[1-2]"'
expect_error root_addr "TACL_ROOT_ADDR=\"nohostport\" is not host:port" \
    'RANK=0 WORLD_SIZE=1 TACL_ROOT_ADDR=nohostport'

finish
