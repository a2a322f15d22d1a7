"""The convolution layer :class:`Conv2d` ('same' padding, stride 1): im2col + GEMM in chunks of
rows, or Winograd F(2x2, 3x3) for 3x3 kernels; a following activation and 2x2 max-pool fused."""

import numpy as np

from refsgd.errors import RefsgdError
from refsgd.nn import kernels

from .base import Layer, _is_int, _new
from .activations import LeakyReLU


class Conv2d(Layer):
    """k x k convolution, stride 1, 'same' zero padding (p = (k-1)/2, k odd).

    params: weight (F, C, k, k), bias (F,)  (PyTorch's nn.Conv2d layout; cross-correlation)
    forward:  x (C, N, H, W) -> y (F, N, H, W), y = conv(x, W) + b, then the fused activation
              f if any (``fuse``)
    backward: with dz = f'(y) * dy (dy: the gradient of the activation's output),
              db = sum over (N, H, W) of dz;  dW[f, c] = correlation of x[c] with dz[f];
              dx = the 'same' convolution of dz with the kernel flipped in space and with its
              channel axes swapped, Wf[c, f, a, b] = W[f, c, k-1-a, k-1-b]
    init:     W ~ N(0, 2/(C*k*k)) (He et al. 2015), b = 0

    3x3 kernels (every bundled model) use Winograd's F(2x2, 3x3) (``kernels.wino_*``): per 2x2
    output tile, 16 products per channel pair instead of 36, i.e. 16 matrix products
    U[p] (F, C) @ V[p] (C, tiles) with 2.25x fewer flops than im2col. The backward pass uses the
    same transforms: dx is that forward algorithm applied to dz with Wf, and dW the adjoint of
    the forward's last two steps, dU[p] = dM[p] @ V[p]^T with dM = A dz A^T per tile, then
    dW = G^T dU G. Other sizes use im2col + GEMM (``WINOGRAD = False`` forces it everywhere).

    The network fuses the activation after a convolution (``fuse``) and a 2x2 max pool after
    that (``fuse_pool``: the pool windows are the Winograd tiles, so only each tile's maximum is
    written, and the backward pass reads the pooled gradient directly), and hands a map from one
    3x3 convolution to the next in the planar layout of ``kernels`` (``in_planar``,
    ``out_planar``). Used alone, a layer has none of these.

    The work goes in chunks of image rows (tile rows for Winograd) whose blocks fit in the L2
    cache (``CHUNK_BYTES``), shared between the cores (``kernels.run_split``): each thread runs
    its own transform -> GEMM -> transform pipelines with a one-thread BLAS. The weight and bias
    gradients are summed per fixed part of the chunks (``kernels.run_parts``) and then over the
    parts in order, so they do not depend on the number of threads.
    """

    kind = "conv"
    CHUNK_BYTES = 1 << 20
    WINOGRAD = True
    pool = False  # a fused 2x2 max pool (``fuse_pool``)
    in_planar = False  # x (and dx) in the planar layout of ``kernels`` (set by the network)
    out_planar = False  # y (and dy) in it

    def __init__(self, name, filters, kernel=3):
        super().__init__(name)
        if not _is_int(filters) or filters < 1:
            raise RefsgdError(f"layer {name}: conv 'filters' must be a positive integer, got {filters!r}")
        if not _is_int(kernel) or kernel < 1 or kernel % 2 == 0:
            raise RefsgdError(
                f"layer {name}: conv 'kernel' must be a positive odd integer ('same' padding), got {kernel!r}")
        self.filters = filters
        self.k = kernel
        self.act = 0  # fused activation: 0 none, 1 leaky ReLU (self.slope), 2 ReLU
        self.slope = 0.0

    def build(self, in_shape):
        if len(in_shape) != 3:
            raise RefsgdError(
                f"layer {self.name}: conv expects a (C, H, W) input, got shape {tuple(in_shape)}")
        C, H, W = in_shape
        self.in_shape = tuple(in_shape)
        self.out_shape = (self.filters, H, W)
        self.param_shapes = (("weight", (self.filters, C, self.k, self.k)), ("bias", (self.filters,)))
        return self.out_shape

    def init(self, rng, params):
        W, b = params
        fan_in = W.shape[1] * self.k * self.k
        W[...] = rng.standard_normal(W.shape) * np.sqrt(2.0 / fan_in)
        b[...] = 0

    def fuse(self, act):
        """Take over the activation layer ``act`` (ReLU or LeakyReLU) that follows this layer."""
        if isinstance(act, LeakyReLU):
            self.act, self.slope = 1, act.slope
        else:
            self.act, self.slope = 2, 0.0
        act.fused = True

    def fuse_pool(self, pool):
        """Take over the 2x2 max pool that follows this layer (or its fused activation); the
        output is then the pooled map. Needs an even height and width."""
        assert pool.k == 2 and self.out_shape[1] % 2 == 0 and self.out_shape[2] % 2 == 0
        self.pool = True
        pool.fused = True

    def _winograd(self):
        return self.WINOGRAD and self.k == 3

    def _planar(self):
        """Whether x and y are planar now (only on the Winograd path: a producer and a consumer
        of a planar map are both 3x3 convolutions, so they agree)."""
        w = self._winograd()
        return self.in_planar and w, self.out_planar and w

    def _input_size(self, x, planar_in):
        """(C, N, H, W) of the input x."""
        if not planar_in:
            return x.shape
        C, H, W = self.in_shape
        return C, x.shape[2] // ((H // 2) * (W // 2)), H, W

    def _step(self, rows, W, itemsize):
        """Image rows per chunk: as many as keep a (rows, step*W) block within CHUNK_BYTES."""
        return max(1, self.CHUNK_BYTES // (rows * W * itemsize))

    def forward(self, x, params, ws=None):
        Wt, b = params
        x = np.ascontiguousarray(x)  # the kernels read whole rows out of x's memory
        pin, pout = self._planar()
        C, N, H, Wd = self._input_size(x, pin)
        F = self.filters
        mode, slope = self.act, x.dtype.type(self.slope)
        if self.pool:
            yp = _new(ws, "yp", (F, N, H // 2, Wd // 2), x.dtype)
            arg = _new(ws, "arg", (F, N, H // 2, Wd // 2), np.uint8)
            if self._winograd():
                self._forward_winograd(x, Wt, b, mode, slope, ws, (yp.reshape(F, -1), arg.reshape(F, -1)))
            else:
                y = self._forward_im2col(x, Wt, b, mode, slope, _new(ws, "y", (F, N, H, Wd), x.dtype))
                kernels.maxpool2_forward(y, yp, arg)
            return yp, (x, yp, arg)
        if pout:
            y = _new(ws, "y", (F, 4, N * (H // 2) * (Wd // 2)), x.dtype)
        else:
            y = _new(ws, "y", (F, N, H, Wd), x.dtype)
        if self._winograd():
            self._forward_winograd(x, Wt, b, mode, slope, ws, y)
        else:
            self._forward_im2col(x, Wt, b, mode, slope, y)
        return y, (x, y, None)

    def _forward_winograd(self, x, Wt, b, mode, slope, ws, out):
        """y (out) = act(conv(x) + b), or with ``out = (yp, arg)`` its 2x2 max pool."""
        pin, pout = self._planar()
        C, N, H, Wd = self._input_size(x, pin)
        F = self.filters
        th, tw = (H + 1) // 2, (Wd + 1) // 2
        U = _new(ws, "U", (16, F, C), x.dtype)
        kernels.wino_weights(Wt, False, U)
        step = max(1, self.CHUNK_BYTES // (16 * (C + F) * tw * x.itemsize))

        def work(lo, hi):  # tile rows lo..hi-1
            Vb = kernels.scratch("wV", (16 * C * step * tw,), x.dtype)
            Mb = kernels.scratch("wM", (16 * F * step * tw,), x.dtype)
            for r0 in range(lo, hi, step):
                r1 = min(hi, r0 + step)
                T = (r1 - r0) * tw
                V = Vb[:16 * C * T].reshape(16, C, T)
                M = Mb[:16 * F * T].reshape(16, F, T)
                if pin:
                    kernels.wino_input_planar(x, th, tw, r0, r1, V)
                else:
                    kernels.wino_input(x, r0, r1, V)
                np.matmul(U, V, out=M)
                if self.pool:
                    kernels.wino_output_pool(M, r0, r1, tw, out[0], out[1], b, slope, mode)
                elif pout:
                    kernels.wino_output_planar(M, r0, r1, tw, out, b, slope, mode)
                else:
                    kernels.wino_output(M, r0, r1, out, b, slope, mode)

        kernels.run_split(work, N * th, step)

    def _forward_im2col(self, x, Wt, b, mode, slope, y):
        C, N, H, Wd = x.shape
        F, k = self.filters, self.k
        W_mat = Wt.reshape(F, -1)
        y_mat = y.reshape(F, N * H * Wd)
        rows = C * k * k
        step = self._step(rows, Wd, x.itemsize)

        def work(lo, hi):  # image rows lo..hi-1
            buf = kernels.scratch("cols", (rows * step * Wd,), x.dtype)
            for r0 in range(lo, hi, step):
                r1 = min(hi, r0 + step)
                cols = buf[:rows * (r1 - r0) * Wd].reshape(rows, -1)
                kernels.im2col(x, k, r0, r1, cols)
                out = y_mat[:, r0 * Wd:r1 * Wd]
                np.matmul(W_mat, cols, out=out)
                kernels.add_channel_bias(out, b)  # while the block is still in cache
                kernels.activate(out, mode, slope)

        kernels.run_split(work, N * H, step)
        return y

    def backward(self, dy, cache, grads, need_dx=True, params=None, ws=None):
        gW, gb = grads
        x, ya, arg = cache
        pin, pout = self._planar()
        C, N, H, Wd = self._input_size(x, pin)
        F = self.filters
        dy = np.ascontiguousarray(dy)
        mode, slope = self.act, x.dtype.type(self.slope)
        if self._winograd() and (need_dx or C >= 8 or pout):
            # (the first layer's weight gradient alone, from few channels, is cheaper by im2col:
            # Winograd would transform dy's F channels for a product with only C rows; unless dy
            # is planar, when the transform is cheap and im2col would need dy's rows rebuilt)
            return self._backward_winograd(dy, x, ya, arg, gW, gb, need_dx, params, ws)
        # im2col (so need_dx is False if the maps are planar): dz = f'(y) dy in full, then the
        # plain backward
        if pin:
            xc = _new(ws, "xc", (C, N, H, Wd), x.dtype)
            kernels.from_planar(x, xc, x, slope, 0)
            x = xc
        if pout:
            dz = _new(ws, "dz", (F, N, H, Wd), dy.dtype)
            kernels.from_planar(dy, dz, ya, slope, mode)
        elif self.pool:
            dp = _new(ws, "dp", dy.shape, dy.dtype)
            np.copyto(dp, dy)
            kernels.activation_mask(dp.reshape(-1), ya.reshape(-1), mode, slope)
            dz = _new(ws, "dz", (F, N, H, Wd), dy.dtype)
            kernels.maxpool2_backward(dp, arg, dz)
        else:
            dz = dy
            kernels.activation_mask(dz.reshape(-1), ya.reshape(-1), mode, slope)
        return self._backward_im2col(dz, x, gW, gb, need_dx, params, ws)

    def _backward_im2col(self, dy, x, gW, gb, need_dx, params, ws):
        C, N, H, Wd = x.shape
        F, k = self.filters, self.k
        dy_mat = dy.reshape(F, -1)
        x_mat = x.reshape(C, -1)
        if need_dx:
            # dx is the 'same' convolution of dy with the kernel flipped in space and with its
            # channel axes swapped, Wf[c, f, a, b] = W[f, c, k-1-a, k-1-b]. So one im2col, of
            # dy, serves both products: dx = Wf_mat @ cols_dy (a plain write, where the direct
            # adjoint would need a col2im scatter-add), and dW, since the (f, a', b') row of
            # cols_dy dotted with x[c] is dW[f, c, k-1-a', k-1-b'].
            Wf = np.ascontiguousarray(params[0][:, :, ::-1, ::-1].transpose(1, 0, 2, 3)).reshape(C, -1)
            dx = _new(ws, "dx", x.shape, x.dtype)
            dx_mat = dx.reshape(C, -1)
            rows = F * k * k
            acc_shape = (rows, C)
        else:
            # dW = dy_mat @ cols_x^T: the first layer's cols_x has only C*k*k (27) rows
            rows = C * k * k
            acc_shape = (F, rows)
        step = self._step(rows, Wd, x.itemsize)
        bounds = kernels.part_bounds(N * H, step)
        accs = np.empty((len(bounds),) + acc_shape, dtype=x.dtype)
        dbs = np.zeros((len(bounds), F), dtype=np.float64)

        def work(p, lo, hi):  # image rows lo..hi-1 into the part p's sums
            buf = kernels.scratch("cols", (rows * step * Wd,), x.dtype)
            part = kernels.scratch("part", acc_shape, x.dtype)
            acc = accs[p]
            for r0 in range(lo, hi, step):
                r1 = min(hi, r0 + step)
                cols = buf[:rows * (r1 - r0) * Wd].reshape(rows, -1)
                d = dy_mat[:, r0 * Wd:r1 * Wd]
                dbs[p] += d.sum(axis=1)
                if need_dx:
                    kernels.im2col(dy, k, r0, r1, cols)
                    np.matmul(cols, x_mat[:, r0 * Wd:r1 * Wd].T, out=acc if r0 == lo else part)
                    np.matmul(Wf, cols, out=dx_mat[:, r0 * Wd:r1 * Wd])
                else:
                    kernels.im2col(x, k, r0, r1, cols)
                    np.matmul(d, cols.T, out=acc if r0 == lo else part)
                if r0 != lo:
                    acc += part

        kernels.run_parts(work, bounds)
        acc = _sum_parts(accs)
        gb[...] = _sum_parts(dbs)
        if need_dx:
            gW[...] = acc.reshape(F, k, k, C)[:, ::-1, ::-1, :].transpose(0, 3, 1, 2)
            return dx
        gW[...] = acc.reshape(gW.shape)
        return None

    def _backward_winograd(self, dy, x, ya, arg, gW, gb, need_dx, params, ws):
        pin, pout = self._planar()
        C, N, H, Wd = self._input_size(x, pin)
        F = self.filters
        mode, slope = self.act, x.dtype.type(self.slope)
        th, tw = (H + 1) // 2, (Wd + 1) // 2
        if self.pool:
            dp, yp, ap = dy.reshape(F, -1), ya.reshape(F, -1), arg.reshape(F, -1)
        elif not mode:
            ya = dy  # unread (the kernels take an array of dy's type)
        # the chunks of the forward pass; per chunk dM and V (the weight gradient), and with dx the
        # transformed dz and its product: up to twice the forward's working set (measured best)
        step = max(1, self.CHUNK_BYTES // (16 * (C + F) * tw * x.itemsize))
        bounds = kernels.part_bounds(N * th, step)
        dU = _new(ws, "dU", (len(bounds), 16, F, C), x.dtype)
        dbs = np.zeros((len(bounds), F), dtype=np.float64)
        if need_dx:
            Uf = _new(ws, "Uf", (16, C, F), x.dtype)
            kernels.wino_weights(params[0], True, Uf)
            dx = _new(ws, "dx", x.shape, x.dtype)  # planar when x is
            nobias = np.empty(0, dtype=x.dtype)

        def work(p, lo, hi):  # tile rows lo..hi-1 into the part p's sums
            dMb = kernels.scratch("wdM", (16 * F * step * tw,), x.dtype)
            Vb = kernels.scratch("wV", (16 * C * step * tw,), x.dtype)
            part = kernels.scratch("wdU", (16, F, C), x.dtype)
            Vdb = kernels.scratch("wVd", (16 * F * step * tw,) if need_dx else (0,), x.dtype)
            if need_dx:
                Mxb = kernels.scratch("wMx", (16 * C * step * tw,), x.dtype)
            acc = dU[p]
            for r0 in range(lo, hi, step):
                r1 = min(hi, r0 + step)
                T = (r1 - r0) * tw
                dM = dMb[:16 * F * T].reshape(16, F, T)
                V = Vb[:16 * C * T].reshape(16, C, T)
                Vd = Vdb[:16 * F * T].reshape(16, F, T) if need_dx else Vdb.reshape(16, F, 0)
                if self.pool:
                    kernels.wino_grad_pool(dp, yp, ap, th, tw, slope, mode, r0, r1, dM, dbs[p], Vd, need_dx)
                elif pout:
                    kernels.wino_grad_planar(dy, ya, th, tw, slope, mode, r0, r1, dM, dbs[p], Vd, need_dx)
                else:
                    kernels.wino_grad(dy, ya, slope, mode, r0, r1, dM, dbs[p], Vd, need_dx)
                if pin:
                    kernels.wino_input_planar(x, th, tw, r0, r1, V)
                else:
                    kernels.wino_input(x, r0, r1, V)
                if r0 == lo:
                    np.matmul(dM, V.transpose(0, 2, 1), out=acc)
                else:
                    np.matmul(dM, V.transpose(0, 2, 1), out=part)
                    acc += part
                if need_dx:
                    Mx = Mxb[:16 * C * T].reshape(16, C, T)
                    np.matmul(Uf, Vd, out=Mx)
                    if pin:
                        kernels.wino_output_planar(Mx, r0, r1, tw, dx, nobias, slope, 0)
                    else:
                        kernels.wino_output(Mx, r0, r1, dx, nobias, slope, 0)

        kernels.run_parts(work, bounds)
        kernels.wino_weight_grad(dU, gW)
        gb[...] = _sum_parts(dbs)
        return dx if need_dx else None

    def describe(self):
        return f"conv {self.k}x{self.k} x{self.filters}"


def _sum_parts(parts):
    """Sum of the rows of ``parts`` in order (a fixed order, whatever the thread count)."""
    total = parts[0].copy()
    for p in parts[1:]:
        total += p
    return total
