"""Single-process training with a local optimizer: plain minibatch SGD, no MPI.

This is the reference every distributed method reduces to on one worker (SSGD on one rank
must equal it exactly) and the job ``refsgd train --serial`` runs. One epoch visits the
batches of :func:`refsgd.datasets.epoch_batches` with rank 0 of a world of 1; each
iteration computes the mean gradient of the batch at w and applies U (:class:`refsgd.optim.SGD`)
with the schedule's learning rate for that iteration.
"""

import time

import numpy as np

from refsgd.errors import RefsgdError
from refsgd.datasets import epoch_batches


def train(net, data, opt, schedule, *, epochs, batch, seed, w=None, log=print, eval_every=1):
    """Train ``net`` on ``data`` for ``epochs``; returns (w, history).

    history: list of dicts per evaluation with epoch, iteration, train_loss (mean of the
    epoch's batch losses), test_loss, test_acc, seconds.
    """
    if w is None:
        w = net.init_params(seed)
    g = np.empty_like(w)
    n = len(data.y_train)
    history = []
    t = 0
    start = time.perf_counter()
    for epoch in range(epochs):
        batches = epoch_batches(seed, epoch, 0, 1, batch, n)
        losses = np.empty(len(batches))
        for b, idx in enumerate(batches):
            losses[b] = net.loss_and_grad(w, data.x_train[idx], data.y_train[idx], out=g)
            if not np.isfinite(losses[b]):
                raise RefsgdError(f"the loss became {losses[b]} at iteration {t} (epoch {epoch}); "
                                  "lower the learning rate")
            opt.step(w, g, schedule.lr(t))
            t += 1
        if (epoch + 1) % eval_every == 0 or epoch + 1 == epochs:
            test_loss, test_acc = net.evaluate(w, data.x_test, data.y_test)
            rec = dict(epoch=epoch + 1, iteration=t, train_loss=float(losses.mean()),
                       test_loss=test_loss, test_acc=test_acc, seconds=time.perf_counter() - start)
            history.append(rec)
            if hasattr(schedule, "observe"):
                schedule.observe(rec["train_loss"])
            log(f"epoch {epoch + 1:>3}  iter {t:>6}  lr {schedule.lr(t - 1):.4g}  train loss {rec['train_loss']:.4f}"
                f"  test loss {test_loss:.4f}  test acc {100 * test_acc:.2f}%  ({rec['seconds']:.1f} s)")
    return w, history
