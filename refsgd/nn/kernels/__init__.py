"""Numba kernels for the memory-bound parts of the network.

Dense algebra (the matrix products of Dense and of Conv2d after im2col) goes to BLAS through
NumPy; what is left is data movement and element-wise work, which NumPy would do with several
passes and temporaries. These kernels do it in one pass.

Feature maps inside the network are stored channel-major, ``(C, N, H, W)`` ("CNHW"), so that
the convolution's matrix product ``W (F, C*k*k) @ cols (C*k*k, N*H*W)`` lands directly in the
next layer's layout with no transpose. All kernels work for float32 and float64 (Numba compiles
one specialisation per dtype and caches it on disk, ``cache=True``).

Inner loops index only with the bare loop variable (or ``2*j``, ``2*j + 1``) into views sliced
outside the loop: Numba wraps negative indices, and on any other index expression that check
keeps LLVM from vectorising the loop (measured 5-20x slower). Each vectorised loop writes one
array, so that LLVM's run-time overlap checks stay few.

By kind: :mod:`.conv` (im2col and the bias), :mod:`.winograd` and :mod:`.winograd_output` (the
Winograd F(2x2, 3x3) convolution), :mod:`.pooling` (max-pool), :mod:`.activations` (the fused
activations and the softmax cross-entropy), :mod:`.threads` (running a layer's chunks on all
cores, the scratch arrays). This package re-exports them: the layers call ``kernels.im2col``.
Numba's on-disk cache checks a kernel against its own file only, so kernels that call one
another share a file (after editing a kernel called from another file, delete ``__pycache__``).
"""

from .conv import (  # noqa: F401
    im2col,
    add_channel_bias,
)
from .activations import (  # noqa: F401
    activate,
    activation_mask,
    leaky_relu_inplace,
    leaky_relu_backward_inplace,
    relu_backward_inplace,
    softmax_xent,
)
from .winograd import (  # noqa: F401
    wino_weights,
    wino_weight_grad,
    wino_input,
    wino_grad,
    wino_grad_pool,
    wino_input_planar,
    wino_grad_planar,
)
from .winograd_output import (  # noqa: F401
    wino_output,
    wino_output_pool,
    wino_output_planar,
    from_planar,
)
from .pooling import (  # noqa: F401
    maxpool2_forward,
    maxpool2_backward,
    maxpool_forward,
    maxpool_backward,
)
from .threads import (  # noqa: F401
    _blas,
    chunk_threads,
    restore_blas,
    blas_held,
    run_split,
    PARTS,
    part_bounds,
    run_parts,
    scratch,
    Arena,
)
