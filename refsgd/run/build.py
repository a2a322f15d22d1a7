"""``build_run(cfg, comm)``: the one way to build a :class:`Run` (the API, bench and the tests)."""

import dataclasses

import numpy as np

from refsgd import datasets, registry
from refsgd.nn import load_model
from refsgd.optim import parse_schedule

from .context import Run


def build_run(cfg, comm, *, net=None, data=None, schedule=None, log=print, restorer=None, checkpoint=None,
              warm=None):
    """The Run of the resolved configuration ``cfg`` (a refsgd.options.Config, its method's defaults
    filled: refsgd.options.resolve) on ``comm``: the method's micro-batches, parameter servers and
    way of counting an epoch from its registry entry. ``net``, ``data`` and ``schedule`` default
    to those ``cfg`` names (--model, --data, --schedule); ``restorer``, ``checkpoint`` and ``warm``
    (the method's kernels' warm-up, refsgd.algorithms.warm_of) as for :class:`Run`."""
    m = registry.method(cfg.algo)
    dtype = np.dtype(cfg.dtype)
    net = load_model(cfg.model, dtype=dtype) if net is None else net
    data = datasets.load(cfg.data, dtype=dtype) if data is None else data
    if schedule is None:
        ipe = m.iterations_per_epoch(cfg, len(data.y_train), comm.Get_size() - m.servers)
        schedule = parse_schedule(cfg.schedule, cfg.lr, ipe)
    # PP-ASGD: an update's micro-batches are the G threads' sub-batches
    return Run(comm, net, data, dataclasses.replace(cfg, tau=m.micro_batches_of(cfg)), schedule, log=log,
               restorer=restorer, checkpoint=checkpoint, servers=m.servers, by_gradients=m.counts_gradients(cfg),
               warm=warm, lagged_checks=m.in_flight_at_boundary)
