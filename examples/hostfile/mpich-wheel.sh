#!/bin/bash
# refsgd on the nodes of a hostfile, no batch system, with the mpich wheel's mpiexec (hydra):
# hydra starts one proxy per node with ssh, each proxy starts its node's ranks. Needs
# passwordless ssh from here to every node, and `./run.sh setup` in a checkout that every node
# sees at the same path (a shared file system): the venv, and the Numba cache inside it.
#
#   examples/hostfile/mpich-wheel.sh HOSTFILE [REFSGD COMMAND AND OPTIONS]
#   examples/hostfile/mpich-wheel.sh hosts check                    # the launch check
#   examples/hostfile/mpich-wheel.sh hosts                          # DASO on the nodes x 2 ranks
#   examples/hostfile/mpich-wheel.sh hosts train --algo ssgd --epochs 5
#
# HOSTFILE: one node per line (hydra also reads NAME:N, N ranks there). Environment:
#   REFSGD_PPN    ranks per node (default 2)
#   REFSGD_VENV   the venv (default the checkout's .venv)
#   REFSGD_IFACE  the interface between the nodes, for hydra's control connections (-iface);
#                 the ranks' own traffic follows the fabric's variables (FI_PROVIDER=tcp
#                 FI_TCP_IFACE=..., UCX_NET_DEVICES=...), which hydra passes on with the whole
#                 environment
#   REFSGD_RSH    what hydra starts its proxies with instead of ssh
#
# Tested on the namespace cluster (tests/mpiexec/test_hostfile.py), where REFSGD_RSH is
# scripts/netns-rsh, which enters a node's namespace instead of ssh-ing to it:
#   scripts/cluster up --nodes 2
#   printf 'refsgd-n0\nrefsgd-n1\n' > hosts
#   scripts/cluster exec head -- env REFSGD_RSH=$PWD/scripts/netns-rsh REFSGD_IFACE=eth0 \
#     examples/hostfile/mpich-wheel.sh hosts
set -uo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
venv=${REFSGD_VENV:-$here/.venv}
hosts=${1:?usage: $0 HOSTFILE [refsgd command and options]}
shift
ppn=${REFSGD_PPN:-2}
nodes=$(grep -cvE '^[[:space:]]*(#|$)' "$hosts") || { echo "$0: no node in $hosts" >&2; exit 2; }
# one BLAS and Numba thread per rank (a rank per core)
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
if [ $# -eq 0 ]; then   # the default: DASO, its trace checkable against the golden of that layout
  mkdir -p runs
  set -- train --algo daso --momentum 0.9 --lr 0.1 --batch 64 --sync-every 2 --plateau-patience 1 \
    --plateau-threshold 0.9 --model digits_tiny --seed 12 --dtype float64 --iterations 35 --no-progress \
    --trace "runs/daso-${nodes}x$ppn-$(date +%Y%m%d-%H%M%S).h5"
fi
launch=(-launcher ssh)
[ -n "${REFSGD_RSH:-}" ] && launch+=(-launcher-exec "$REFSGD_RSH")
[ -n "${REFSGD_IFACE:-}" ] && launch+=(-iface "$REFSGD_IFACE")
exec "$venv/bin/mpiexec" -f "$hosts" -n $((nodes * ppn)) -ppn "$ppn" "${launch[@]}" "$venv/bin/refsgd" "$@"
