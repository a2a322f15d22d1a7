"""DASO's phases (Coquelin et al. 2022, section 3; docs/algorithms.md, section DASO): warm-up,
cycling and cool-down, the cycling parameters B and W, their halving at a plateau of the epochs'
training loss, and the in-flight slots of the cycling syncs, as a function of the iteration and of
the losses. MPI-free: the MPI loop (:mod:`refsgd.algorithms.daso`) and the serial rendering
(:mod:`refsgd.serial.daso`) both follow them, as both follow the lr schedule."""

import numpy as np

from refsgd.optim.schedules import NO_BEST, plateaued

WARMUP, CYCLING, COOLDOWN = "warm-up", "cycling", "cool-down"

# positions in the phase state array (float64)
_B, _W, _C, _K, _BEST, _BAD = range(6)
_SLOTS = 6                      # then two in-flight slots of (due iteration or -1, group k, S)


class Phases:
    """DASO's phases and cycling parameters (B, W) as a function of the iteration and of the
    epochs' training losses. ``state`` is the float64 array [B, W, c, k, best, bad count, slot 0 (due, k, S), slot 1]."""

    def __init__(self, iters_per_epoch, total, cfg):
        self.ipe = iters_per_epoch
        self.warm_end = min(cfg.warmup_epochs * iters_per_epoch, total)
        self.cool_start = max(total - cfg.cooldown_epochs * iters_per_epoch, self.warm_end)
        self.b_max = cfg.sync_every
        self.patience = cfg.plateau_patience
        self.threshold = cfg.plateau_threshold
        self.state = np.zeros(_SLOTS + 6)
        self.state[[_B, _W, _BEST]] = [self.b_max, max(1, self.b_max // 4), NO_BEST]  # finite: checkpointed
        self.state[_SLOTS::3] = -1

    def phase(self, t):
        if t < self.warm_end:
            return WARMUP
        return CYCLING if t < self.cool_start else COOLDOWN

    def begin(self, t, epoch_loss):
        """Phase bookkeeping at the start of batch t; ``epoch_loss()`` gives the mean training
        loss of the epoch that just ended (collective in the MPI code). Returns the change as
        (what, fields) or None."""
        st, ph = self.state, self.phase(t)
        if t == 0 and ph == WARMUP:
            return WARMUP, {}
        if ph == COOLDOWN and t == self.cool_start:
            return COOLDOWN, {}
        if ph != CYCLING:
            return None
        if t == self.warm_end:
            st[_B], st[_W], st[_C] = self.b_max, max(1, self.b_max // 4), 0
            return CYCLING, dict(B=int(st[_B]), W=int(st[_W]))
        if t % self.ipe or t - self.ipe < self.warm_end:
            return None
        # an epoch of cycling has ended: observe its loss
        if not plateaued(st[_BEST:_BAD + 1], epoch_loss(), self.threshold, self.patience):
            return None
        if st[_B] == 1 and st[_W] == 1:
            st[_B], st[_W] = self.b_max, max(1, self.b_max // 4)
            what = "plateau: B and W reset"
        else:
            st[_B], st[_W] = max(1, st[_B] // 2), max(1, st[_W] // 2)
            what = "plateau: B and W halved"
        st[_C] = 0
        return what, dict(B=int(st[_B]), W=int(st[_W]))

    # --- the cycling counters and the in-flight slots
    @property
    def B(self):
        return int(self.state[_B])

    @property
    def W(self):
        return int(self.state[_W])

    @property
    def k(self):
        return int(self.state[_K])

    def sends(self):
        """L9's test, then one more batch counted: does batch c of this setting send?"""
        st = self.state
        due = st[_C] % st[_B] == 0
        st[_C] += 1
        return due

    def rotate(self, G):
        self.state[_K] = (self.state[_K] + 1) % G

    def open_slot(self, t, k, S):
        """Remember a sync sent at t by group k, due S batches later; returns its slot."""
        j = 0 if self.state[_SLOTS] < 0 else 1
        self.state[_SLOTS + 3 * j: _SLOTS + 3 * j + 3] = [t + S, k, S]
        return j

    def due(self, t):
        """The slots due at batch t (oldest first) as (slot, k, S), and frees them."""
        st, out = self.state, []
        # due at once (after W halved): the earlier send first; the send was at due - S
        for j in sorted(range(2), key=lambda j: (st[_SLOTS + 3 * j], -st[_SLOTS + 3 * j + 2])):
            if st[_SLOTS + 3 * j] == t:
                out.append((j, int(st[_SLOTS + 3 * j + 1]), int(st[_SLOTS + 3 * j + 2])))
                st[_SLOTS + 3 * j] = -1
        return out

    def pending(self):
        return [j for j in range(2) if self.state[_SLOTS + 3 * j] >= 0]


def epoch_loss(per_rank):
    """The mean of every rank's batch losses over an epoch (rank order, float64), the plateau's
    measure: ``per_rank`` is one 1-D sequence of losses per rank."""
    total, n = 0.0, 0
    for losses in per_rank:
        arr = np.ascontiguousarray(losses, dtype=np.float64)
        total += float(np.sum(arr))
        n += arr.size
    return total / max(n, 1)
