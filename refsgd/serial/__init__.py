"""Serial renderings: every method for N workers in one process, written from the equations.

``RENDERINGS`` maps the ``--algo`` name to ``f(net, data, cfg, schedule, N, T) -> trace fields``
(see :mod:`refsgd.trace`). ``refsgd golden`` writes their output as golden files.
"""

from refsgd.serial.daso import RENDERINGS as _DASO
from refsgd.serial.dc import RENDERINGS as _DC
from refsgd.serial.laga import RENDERINGS as _LAGA
from refsgd.serial.pipesgd import RENDERINGS as _PIPE
from refsgd.serial.ppasgd import RENDERINGS as _PP
from refsgd.serial.ssgd import RENDERINGS as _SSGD

RENDERINGS = dict(_SSGD)
RENDERINGS.update(_DC)
RENDERINGS.update(_LAGA)
RENDERINGS.update(_PIPE)
RENDERINGS.update(_DASO)
RENDERINGS.update(_PP)
