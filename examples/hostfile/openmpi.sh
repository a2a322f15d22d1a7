#!/bin/bash
# refsgd on the nodes of a hostfile, no batch system, with the system's Open MPI: mpirun starts
# an Open MPI daemon per node with ssh, each daemon starts its node's ranks. Needs passwordless
# ssh from here to every node, and a venv whose mpi4py is built against that Open MPI, in a
# checkout that every node sees at the same path:
#
#   MPICC=$(command -v mpicc.openmpi) REFSGD_VENV=.venv-ompi REFSGD_SYSTEM_MPI=1 ./run.sh setup
#   examples/hostfile/openmpi.sh HOSTFILE [REFSGD COMMAND AND OPTIONS]
#   examples/hostfile/openmpi.sh hosts check                       # the launch check
#   examples/hostfile/openmpi.sh hosts                             # DASO on the nodes x 2 ranks
#
# HOSTFILE: one node per line (Open MPI also reads "NAME slots=N"). Environment:
#   REFSGD_PPN    ranks per node (default 2)
#   REFSGD_VENV   the venv (default the checkout's .venv-ompi)
#   MPIRUN        Open MPI's mpirun (default mpirun; Debian's is also mpirun.openmpi)
#   REFSGD_IFACE  the interface between the nodes, for the daemons' and the ranks' TCP
#                 (--mca oob_tcp_if_include, btl_tcp_if_include)
#   REFSGD_RSH    what mpirun starts its daemons with instead of ssh (plm_rsh_agent)
# Unlike hydra, mpirun passes the ranks only the variables named with -x.
#
# Tested on the namespace cluster (tests/mpiexec/test_hostfile.py), where REFSGD_RSH is
# scripts/netns-rsh, which enters a node's namespace instead of ssh-ing to it:
#   scripts/cluster up --nodes 2
#   printf 'refsgd-n0\nrefsgd-n1\n' > hosts
#   scripts/cluster exec head -- env REFSGD_RSH=$PWD/scripts/netns-rsh REFSGD_IFACE=eth0 \
#     MPIRUN=mpirun.openmpi examples/hostfile/openmpi.sh hosts
set -uo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
venv=${REFSGD_VENV:-$here/.venv-ompi}
hosts=${1:?usage: $0 HOSTFILE [refsgd command and options]}
shift
ppn=${REFSGD_PPN:-2}
nodes=$(grep -cvE '^[[:space:]]*(#|$)' "$hosts") || { echo "$0: no node in $hosts" >&2; exit 2; }
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
if [ $# -eq 0 ]; then
  mkdir -p runs
  set -- train --algo daso --momentum 0.9 --lr 0.1 --batch 64 --sync-every 2 --plateau-patience 1 \
    --plateau-threshold 0.9 --model digits_tiny --seed 12 --dtype float64 --iterations 35 --no-progress \
    --trace "runs/daso-${nodes}x$ppn-$(date +%Y%m%d-%H%M%S).h5"
fi
launch=()
[ -n "${REFSGD_RSH:-}" ] && launch+=(--mca plm_rsh_agent "$REFSGD_RSH")
[ -n "${REFSGD_IFACE:-}" ] && launch+=(--mca oob_tcp_if_include "$REFSGD_IFACE" --mca btl_tcp_if_include "$REFSGD_IFACE")
exec "${MPIRUN:-mpirun}" --hostfile "$hosts" -n $((nodes * ppn)) --map-by "ppr:$ppn:node" "${launch[@]}" \
  -x OMP_NUM_THREADS -x PATH "$venv/bin/refsgd" "$@"
