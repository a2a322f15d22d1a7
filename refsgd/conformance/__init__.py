"""Check another implementation of refsgd's methods against refsgd's golden trajectories: the
conformance suite (as ONNX's backend tests are for runtimes).

An implementation is wrapped in a :class:`Backend` (set up from the model spec, the initial flat
weights and the hyperparameters; one step given every worker's batch indices; read back the state
arrays the trace names). refsgd owns the data, the batches, the seeds, the loop over steps, the
writing of the trace and the comparison::

    refsgd conformance run mypkg.mymodule:MyBackend      # a table: pass / fail (first difference) / not declared
    pytest --pyargs refsgd.conformance --backend mypkg.mymodule:MyBackend     # one test per configuration
    refsgd conformance export DIR --algo ssgd            # the inputs and expected states as HDF5 and NPY files
    refsgd conformance check DIR                         # compare the states another language wrote back

From Python: :func:`configurations` lists them, :func:`run` runs a backend through one
(:class:`Outcome`), :class:`References` renders the expected traces. docs/conformance.md is the
walk-through. This module loads NumPy only when those are used (its pytest plugin is imported by
every pytest run where refsgd is installed).
"""

from refsgd.conformance.backend import Backend, Setup, load_backend  # noqa: F401 -- stdlib only

#: the names of refsgd.conformance.suite exported here, imported on first use (it loads NumPy, h5py, Numba)
_SUITE = ("Configuration", "Outcome", "References", "configurations", "run", "PASS", "FAIL", "NOT_DECLARED")

__all__ = ["Backend", "Setup", "load_backend", *_SUITE]


def __getattr__(name):
    if name in _SUITE:
        from refsgd.conformance import suite  # here: the plugin's import of this package stays light  # noqa: PLC0415 start-up: NumPy, h5py and the renderings, which `refsgd --help` does without
        return getattr(suite, name)
    raise AttributeError(f"module 'refsgd.conformance' has no attribute {name!r}")
