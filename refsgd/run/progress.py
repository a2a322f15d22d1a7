"""The progress display of rank 0 (``--progress``): a tqdm bar with the loss and the method's
own figures, or a line per loss check where stderr is not a terminal."""

import shutil
import sys
import time

import numpy as np
from tqdm import tqdm


class Progress:
    """Rank 0's progress: a bar when stdout is a terminal, else a status line now and then.

    Under mpiexec stdout is a pipe even in a terminal, so a bar would be a wall of carriage
    returns; there, and in a file, a line ``iter T/TOTAL (P%)  loss L  S samples/s  ETA E`` is
    printed every 10% of the run or every 30 s, whichever comes first (at most one a second).
    A run with a gradient budget (PP-ASGD's threaded mode with --epochs) counts its progress
    in gradients: ``iter T, gradients G/BUDGET (P%)  ...``. The rate and the ETA leave out the
    seconds Numba spent compiling or loading its kernels (once); the rate is the summary's
    throughput so far: the samples over the iterations' wall times (:meth:`Run.iterations_time`,
    without the evaluations and checkpoints between them). Every other line (evaluations,
    events) starts a line of its own.
    """

    EVERY_FRACTION, EVERY_SECONDS, AT_MOST = 0.1, 30.0, 1.0

    def __init__(self, run, stream=None):
        self.run = run
        self.stream = stream or sys.stdout
        self.start = time.perf_counter()
        self.compiled = run.clock.compiling.total()
        self.since = len(run.records.iterations["wall"])   # this process's iterations (after a --resume)
        self.bar = None
        self.last_time, self.last_pos = self.start, self._position(run.t)[0]
        self.first = self.last_pos
        # a terminal too narrow to draw in (some headless sessions report 0 columns) gets lines
        if self.stream.isatty() and shutil.get_terminal_size((0, 0)).columns >= 40:
            pos, end = self._position(run.t)
            self.bar = tqdm(total=end, initial=pos, unit="it" if run.budget is None else " gradients",
                            dynamic_ncols=True, leave=False, file=self.stream)

    def _position(self, done):
        """(where the run is, where it ends): iterations, or gradients with a budget."""
        run = self.run
        return (done, run.total) if run.budget is None else (int(run.grads_done), int(run.budget))

    def show(self, done, loss):
        now = time.perf_counter()
        elapsed = max(now - self.start - (self.run.clock.compiling.total() - self.compiled), 1e-12)
        rate = self.run.samples_per_second(self.run.iterations_time(self.since))
        pos, end = self._position(done)
        if self.bar is not None:
            self.bar.update(pos - self.bar.n)
            self.bar.set_postfix(loss=f"{loss:.4f}", samples_s=f"{rate:.0f}", **self.run.progress_info)
            return
        due = (pos - self.last_pos >= self.EVERY_FRACTION * end or now - self.last_time >= self.EVERY_SECONDS
               or pos >= end)
        if not due or (now - self.last_time < self.AT_MOST and pos < end):
            return
        speed = (pos - self.first) / elapsed
        eta = (end - pos) / speed if speed > 0 else float("inf")
        extra = "".join(f"  {k} {v}" for k, v in self.run.progress_info.items())
        where = (f"{done:>{len(str(end))}d}/{end}" if self.run.budget is None else
                 f"{done}, gradients {pos:,d}/{end:,d}")
        print(f"iter {where} ({100 * pos / end:5.1f}%)  loss {loss:.4f}  "
              f"{rate:,.0f} samples/s  ETA {_clock(eta)}{extra}", file=self.stream, flush=True)
        self.last_time, self.last_pos = now, pos

    def close(self):
        if self.bar is not None:
            self.bar.close()


def _clock(seconds):
    if not np.isfinite(seconds):
        return "?"
    s = int(round(seconds))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"
