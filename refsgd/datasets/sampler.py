"""The sampler: two pure functions of the seed and the position (no hidden state, so a resumed
run draws the same batches): :func:`epoch_batches` (without replacement) and :func:`randpick`
(with replacement) and :func:`thread_randpick` (with replacement, PP-ASGD's ``randpick``: a
stream per rank and gradient thread, shared by its MPI loop and its serial rendering)."""

from __future__ import annotations

import numpy as np

from refsgd.errors import RefsgdError


# ---------------------------------------------------------------------------
# Sampler
# ---------------------------------------------------------------------------


def _nonneg_int(value, what):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise RefsgdError(f"{what} must be an integer, got {value!r}.")
    if value < 0:
        raise RefsgdError(f"{what} must be >= 0, got {value}.")
    return int(value)


def epoch_batches(seed, epoch, rank, world, batch, n) -> np.ndarray:
    """The mini-batches of one rank for one epoch (sampling without replacement).

    Exactly::

        perm = np.random.Generator(np.random.PCG64([seed, epoch])).permutation(n)
        num_batches = n // (world * batch)
        shard = perm[rank * num_batches * batch : (rank + 1) * num_batches * batch]
        return shard.reshape(num_batches, batch).astype(np.int64)

    All ranks draw the same permutation; the last ``n - num_batches*world*batch``
    entries are dropped so every rank gets the same number of batches, and the
    shards of different ranks are disjoint.  Row ``i`` is the ``i``-th
    mini-batch of that rank.  ``seed`` and ``epoch`` are non-negative integers;
    ``0 <= rank < world``.  Raises :class:`RefsgdError` if ``num_batches == 0``.
    """
    seed = _nonneg_int(seed, "seed")
    epoch = _nonneg_int(epoch, "epoch")
    rank = _nonneg_int(rank, "rank")
    world = _nonneg_int(world, "world")
    batch = _nonneg_int(batch, "batch")
    n = _nonneg_int(n, "n")
    if world < 1 or batch < 1:
        raise RefsgdError(f"world and batch must be >= 1, got world = {world}, "
                          f"batch = {batch}.")
    if rank >= world:
        raise RefsgdError(f"rank {rank} is outside [0, {world}).")
    num_batches = n // (world * batch)
    if num_batches == 0:
        raise RefsgdError(f"the training set has {n} samples, too few for world*batch = "
                          f"{world}*{batch} = {world * batch}.")
    perm = np.random.Generator(np.random.PCG64([seed, epoch])).permutation(n)
    per_rank = num_batches * batch
    shard = perm[rank * per_rank:(rank + 1) * per_rank]
    return np.ascontiguousarray(shard.reshape(num_batches, batch), dtype=np.int64)


def randpick(seed, rank, step, batch, n) -> np.ndarray:
    """One mini-batch drawn with replacement (PP-ASGD's ``randpick``).

    Exactly::

        np.random.Generator(np.random.PCG64([seed, rank, step])).integers(0, n, size=batch)

    returned as int64 of shape (batch,): an independent stream per
    (seed, rank, step), each index uniform in [0, n).  All arguments are
    non-negative integers, ``n >= 1``, ``batch >= 1``.
    """
    seed = _nonneg_int(seed, "seed")
    rank = _nonneg_int(rank, "rank")
    step = _nonneg_int(step, "step")
    batch = _nonneg_int(batch, "batch")
    n = _nonneg_int(n, "n")
    if n < 1:
        raise RefsgdError("the training set has 0 samples, cannot pick a batch.")
    if batch < 1:
        raise RefsgdError(f"batch must be >= 1, got {batch}.")
    gen = np.random.Generator(np.random.PCG64([seed, rank, step]))
    return gen.integers(0, n, size=batch).astype(np.int64, copy=False)


def thread_randpick(seed, rank, thread, j, n, b):
    """PP-ASGD's randpick (Sato et al. 2017, Algorithm 3, L3): sub-batch j (counted from the start
    of the run) of gradient thread ``thread`` of ``rank``, b indices in [0, n) with replacement,
    exactly ``np.random.default_rng([seed, rank, thread, j]).integers(0, n, b)``."""
    return np.random.default_rng([seed, rank, thread, j]).integers(0, n, b)
