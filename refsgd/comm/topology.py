"""Nodes and groups: the two-level communicators of a hierarchical method (DASO).

A cluster is P nodes of G ranks. The *node-local* communicator holds the G ranks of a node; the
*global group* k holds local rank k of every node (P ranks, one per node), so that global
communication happens within a group while the other groups compute (Coquelin et al. 2022,
Figure 1)::

    node 0: ranks  0 .. G-1        local ranks 0 .. G-1
    node 1: ranks  G .. 2G-1       group k = {local rank k of node 0, of node 1, ...}
    ...

Nodes are found with ``MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)`` (the ranks that share
memory), or, with ``ranks_per_node = G`` (``--ranks-per-node``), formed as virtual nodes of G
consecutive ranks, so that a layout of several nodes runs and is tested on one machine. Every
node must have the same number of ranks (the paper assumes homogeneous nodes); otherwise every
rank raises the same RefsgdError.

Within a node the ranks are ordered by their rank in ``comm``; a group is ordered by node, and
nodes are numbered by the order of their lowest rank, so a group's rank i is on node i.

Links: the local communicator is wrapped with ``local_link`` (``--local-link``; default none:
the real one), the groups with ``link`` (``--link``: between nodes), both counted in ``traffic``
as "local" and "global" (see :mod:`refsgd.comm.linkcomm`). ``close()`` frees the communicators.
"""

from mpi4py import MPI

from refsgd.errors import AgreedError, RefsgdError
from refsgd.comm.linkcomm import wrap


class Topology:
    """``local`` (G ranks of this node), ``group`` (local rank ``local_rank`` of every node),
    ``node`` (this rank's node, 0 .. P-1), ``local_rank``, ``G`` and ``P``."""

    def __init__(self, comm, ranks_per_node=None, link=None, local_link=None, traffic=None):
        rank, size = comm.Get_rank(), comm.Get_size()
        if ranks_per_node is not None:
            if ranks_per_node < 1 or size % ranks_per_node:
                raise RefsgdError(f"--ranks-per-node {ranks_per_node} does not divide the {size} ranks into "
                                  "equal nodes")
            local = comm.Split(color=rank // ranks_per_node, key=rank)
        else:
            local = comm.Split_type(MPI.COMM_TYPE_SHARED, key=rank)
        # every rank learns every node's size and lowest rank, so all agree on the outcome
        lowest = local.allreduce(rank, op=MPI.MIN)
        seen = comm.allgather((lowest, local.Get_size()))
        sizes = {low: g for low, g in seen}
        if len(set(sizes.values())) != 1:
            local.Free()
            shown = ", ".join(f"node of rank {low}: {g}" for low, g in sorted(sizes.items()))
            raise AgreedError(f"the ranks do not form equal nodes ({shown} ranks); run the same number of "
                              "ranks on every node, or give --ranks-per-node")
        self.virtual = ranks_per_node is not None
        self.G = local.Get_size()
        self.P = len(sizes)
        self.local_rank = local.Get_rank()
        self.node = sorted(sizes).index(lowest)
        group = comm.Split(color=self.local_rank, key=self.node)
        self._owned = [local, group]
        self.local = wrap(local, local_link, traffic, tier="local")
        self.group = wrap(group, link, traffic, tier="global")

    def describe(self):
        return nodes_text(self.P, self.G, self.virtual)

    def close(self):
        """Free the communicators (collective over ``comm``'s ranks, like their creation)."""
        for c in self._owned:
            c.Free()
        self._owned = []


def nodes_text(nodes, ranks_per_node, virtual=False):
    """"2 virtual nodes of 2 ranks", "1 node of 4 ranks" (``virtual``: formed by --ranks-per-node)."""
    def n(k, what):
        return f"{k} {what}{'' if k == 1 else 's'}"
    return f"{n(nodes, 'virtual node' if virtual else 'node')} of {n(ranks_per_node, 'rank')}"
