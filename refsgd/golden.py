"""Golden trajectories: a method's serial rendering run and written as a trace (``refsgd
golden``, and the expected traces of :mod:`refsgd.conformance`).

:func:`render` checks a configuration as ``refsgd golden`` does (the method's own checks, the
Ring-AllReduce's order of sums, dcasgd's round-robin) and runs the serial rendering
(:mod:`refsgd.serial`) of N workers for T steps in one process, no MPI; and writes its trace
(:mod:`refsgd.trace`) atomically where asked.
"""

import dataclasses
import os

import numpy as np

from refsgd import api, datasets, trace
from refsgd.errors import RefsgdError
from refsgd.files import check_distinct, check_output
from refsgd.nn import load_model
from refsgd.optim import parse_schedule
from refsgd.options import config
from refsgd.registry import method
from refsgd.serial import rendering


@dataclasses.dataclass
class Golden:
    """A rendered trajectory: the resolved configuration, the network, the data set, the config
    a trace records and the trace's fields (w0, batches, loss, lr, states)."""

    cfg: object
    net: object
    data: object
    config: dict
    fields: dict

    def write(self, path, source="serial"):
        trace.write(path, method=self.cfg.algo, source=source, net=self.net, data=self.data, config=self.config,
                    **self.fields)


def render(given, workers, steps, out_path=None, force=False):
    """The serial rendering of the configuration ``given`` (a :class:`refsgd.options.Config`) for
    ``workers`` workers and ``steps`` steps: a :class:`Golden` (RefsgdError on a configuration
    the renderings do not take). With ``out_path``, the trace is written there once the input is
    checked (refusing to replace a file unless ``force``, or to write over an input)."""
    m = method(given.algo)
    if "ps_order" in m.options:  # the serial rendering serves the workers in turn
        if given.ps_order not in (None, "round-robin"):
            raise RefsgdError(f"the serial rendering of {m.name} serves the workers round-robin (1, 2, ..., N-1 in "
                              "every round): --ps-order arrival has no serial rendering")
        given = dataclasses.replace(given, ps_order="round-robin")
    if given.allreduce == "mpi":
        raise RefsgdError("the serial renderings sum over workers in the Ring-AllReduce's order: refsgd golden "
                          "takes --allreduce ring (its default); a trace of --allreduce mpi verifies against it "
                          "within round-off")
    if "allreduce" in m.options:
        given = dataclasses.replace(given, allreduce="ring")
    cfg = api.method(given, workers)
    dtype = np.dtype(cfg.dtype)
    net = load_model(cfg.model, dtype=dtype)
    data = datasets.load(cfg.data, dtype=dtype)
    datasets.check_fits(data, net.input_shape, net.num_classes, model=net.name)
    schedule = parse_schedule(cfg.schedule, cfg.lr, m.iterations_per_epoch(cfg, len(data.y_train), workers - m.servers))
    if out_path is not None:
        check_distinct([("--data", cfg.data), ("--model", cfg.model if os.path.isfile(cfg.model) else None)],
                       [("--out", out_path)])
        check_output(out_path, "--out", force)
    fields = rendering(cfg.algo)(net, data, dataclasses.replace(cfg, tau=m.micro_batches_of(cfg)), schedule, workers,
                                 steps)
    trace.check_finite(fields, f"the serial rendering of {cfg.algo}")
    golden = Golden(cfg, net, data, config(cfg, run=False, extra=dict(workers=workers, steps=steps)), fields)
    if out_path is not None:
        golden.write(out_path)
    return golden
