"""The measurements: ``bench step`` (one process) and ``bench overlap`` (in an MPI world), and
the codecs' costs shared with ``experiments/codec_cost.py``.

Modules: :mod:`.step`, :mod:`.codec_cost`, :mod:`.world` (what overlap measures of its MPI world),
:mod:`.overlap`; this package re-exports them.
"""

from .step import (  # noqa: F401
    step_flops,
    blas_peak,
    step,
    format_step,
)
from .codec_cost import (  # noqa: F401
    CODEC_NAMES,
    timed_collective,
    codec_costs,
    format_ring,
    format_codecs,
)
from .world import (  # noqa: F401
    measured_link,
)
from .overlap import (  # noqa: F401
    synthetic_data,
    synthetic_size,
    split_method,
    method_config,
    span_seconds,
    timeline_cost,
    _ratio_link,
    OverlapSpec,
    overlap,
    parse_ratios,
    str_link,
    overlap_json,
    format_overlap,
)
