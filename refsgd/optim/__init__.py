r"""The local optimizer U and the learning-rate schedules.

Modules: :mod:`.sgd` (U and the fused updates), :mod:`.schedules`, :mod:`.checks` (their
argument checks); this package re-exports them.

This module holds

* :class:`SGD`, the local update rule ``U`` that every distributed method applies to a
  (local, averaged, stale or corrected) gradient: stochastic gradient descent with optional
  momentum, Nesterov momentum and L2 weight decay, in one of two momentum conventions;
* the learning-rate schedules (:class:`Constant`, :class:`WarmupStep`,
  :class:`WarmupLinearDecay`, :class:`WarmupConstant`, :class:`ReduceOnPlateau`), the
  :func:`make_schedule` factory and the :data:`SCHEDULES` table for a command line's help.

Conventions: parameters ``w`` and gradients ``g`` are flat 1-D NumPy arrays of one floating
dtype (float32 or float64). Every update happens in place, on ``w`` and on the optimizer's
state arrays, which are plain arrays (exposed in ``SGD.state``) so that a checkpoint can save
them and later write them back. The learning rate is not part of the optimizer: it is passed
to every call, and a schedule supplies it.

Two momentum forms
------------------
With learning rate ``lr_t`` at step t, momentum ``mu``, weight decay ``wd`` and the decayed
gradient ``g'_t = g_t + wd * w_{t-1}``::

    form="pytorch" (buffer b, b_0 = 0)        form="mxnet" (velocity v, v_0 = 0)
    ----------------------------------        ----------------------------------
    b_t = mu * b_{t-1} + g'_t                 v_t = mu * v_{t-1} - lr_t * g'_t
    w_t = w_{t-1} - lr_t * b_t                w_t = w_{t-1} + v_t

The PyTorch form (``torch.optim.SGD`` with dampening 0) accumulates gradients and applies the
*current* learning rate to the whole buffer; the MXNet form (MXNet's ``sgd_mom_update``, and
the notation of Sato et al. used by DC-S3GD and PP-ASGD) accumulates moves, each already scaled
by the learning rate of the step that produced it.

Equivalence. Start both forms from the same ``w_0`` with zero state, feed them the same
gradients, and keep the learning rate constant, ``lr_t = eta`` for every t. Then, by induction,

    v_t = -eta * b_t        for every t >= 0,

(``v_t = mu*v_{t-1} - eta*g'_t = -eta*(mu*b_{t-1} + g'_t) = -eta*b_t``), so the moves
``-eta*b_t`` and ``v_t`` coincide and so do the weight trajectories (up to rounding, which
differs because the products are formed in a different order). The relationship breaks as
soon as the learning rate changes: if it goes from eta to eta' at step t, the PyTorch form
moves by ``-eta'*(mu*b_{t-1} + g'_t) = mu*(eta'/eta)*v_{t-1} - eta'*g'_t``, i.e. it rescales
the accumulated velocity by ``eta'/eta``, while the MXNet form keeps the old velocity
``mu*v_{t-1}`` and applies eta' only to the new gradient. With a warm-up or a decaying
schedule the two trajectories therefore differ (slightly, when the lr changes slowly; visibly
at a step decay). The relationship also gives the state conversion at a given lr:
``v = -lr*b``, ``b = -v/lr`` (lr > 0). Nesterov momentum is offered in the PyTorch form only.
Without momentum (mu = 0) the two forms are the same rule, ``w_t = w_{t-1} - lr_t * g'_t``.
"""

from .schedules import (  # noqa: F401
    Schedule,
    Constant,
    WarmupStep,
    WarmupLinearDecay,
    WarmupConstant,
    NO_BEST,
    plateaued,
    ReduceOnPlateau,
    SCHEDULES,
    make_schedule,
    parse_schedule,
)

__all__ = [
    "SGD",
    "Schedule",
    "Constant",
    "WarmupStep",
    "WarmupLinearDecay",
    "WarmupConstant",
    "ReduceOnPlateau",
    "make_schedule",
    "parse_schedule",
    "SCHEDULES",
]

#: the names of :mod:`.sgd`, imported at their first use: its Numba kernels' import (0.2 s) is not
#: paid by a command that only reads the schedules (the command line's options, an error in them)
_SGD_NAMES = ("FORMS", "decay_mask", "SGD", "momentum_predict", "horizon", "warm", "fused_step")


def __getattr__(name):
    if name in _SGD_NAMES:
        from . import sgd  # noqa: PLC0415 start-up: Numba only where the update is used
        return getattr(sgd, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
