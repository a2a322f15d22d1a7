"""The bundled model specs: gradient checks, the public API's contracts, spec errors, torch oracle."""

import numpy as np
import pytest

from tests.helpers.gradcheck import TOL, model_grad_errors
from refsgd import RefsgdError
from refsgd.nn import available_models, build, load_model

MODELS = ["digits_mlp", "digits_cnn", "mnist_mlp", "cifar10_cnn", "cifar100_cnn", "cifar100_convex"]


def batch(net, n=2, seed=1):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n,) + net.input_shape)
    return x.astype(net.dtype), rng.integers(0, net.num_classes, n)


def test_bundled_models_are_listed():
    assert set(MODELS) <= set(available_models())


@pytest.mark.parametrize("name", MODELS)
def test_model_gradcheck_float64(name):
    net = load_model(name, dtype=np.float64)
    w = net.init_params(0)
    w += 0.01 * np.random.default_rng(2).standard_normal(w.shape)  # nonzero biases too
    x, y = batch(net)
    errs = model_grad_errors(net, w, x, y, coords=6 if net.num_params > 1e5 else 10)
    bad = {k: v for k, v in errs.items() if not v < TOL}
    assert not bad, f"relative errors above {TOL}: {bad}"


def test_frozen_layers_get_zero_gradient_and_stay():
    net = load_model("cifar100_convex", dtype=np.float64)
    assert net.trainable.sum() == 512 * 100 + 100
    lo = net.num_params - (512 * 100 + 100)
    assert net.trainable[lo:].all() and not net.trainable[:lo].any()
    w = net.init_params(0)
    x, y = batch(net)
    g = np.full_like(w, np.nan)
    net.loss_and_grad(w, x, y, out=g)
    assert np.all(g[:lo] == 0)
    # the trainable part equals the full model's gradient of the same layer
    full = load_model("cifar100_cnn", dtype=np.float64)
    gf = np.empty_like(w)
    full.loss_and_grad(w, x, y, out=gf)
    np.testing.assert_allclose(g[lo:], gf[lo:], rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("name", ["digits_cnn", "cifar100_convex"])
def test_on_segment_reports_each_final_segment_once_last_first(name):
    net = load_model(name, dtype=np.float64)
    w = net.init_params(3)
    x, y = batch(net)
    g = np.empty_like(w)
    seen = []
    net.loss_and_grad(w, x, y, out=g, on_segment=lambda n, lo, hi: seen.append((n, lo, hi, g[lo:hi].copy())))
    names = [s[0] for s in seen]
    assert sorted(names) == sorted(n for n, _, _ in net.segments) and len(set(names)) == len(names)
    trainable = [s for s in seen if net.trainable[s[1]]]
    assert [s[1] for s in trainable] == sorted((s[1] for s in trainable), reverse=True)  # last layer first
    for n, lo, hi, snapshot in seen:
        np.testing.assert_array_equal(snapshot, g[lo:hi])  # it was already final when reported


@pytest.mark.parametrize("name", ["mnist_mlp", "digits_cnn", "cifar100_convex"])
def test_on_layer_is_called_after_every_layer_and_changes_nothing(name):
    """--poll's hook: once after each layer of the forward pass and of the backward pass (down to
    the lowest trainable layer); the loss and the gradient are bitwise those without it."""
    net = load_model(name, dtype=np.float64)
    w = net.init_params(3)
    x, y = batch(net)
    g0, g1 = np.empty_like(w), np.empty_like(w)
    calls = []
    l0 = net.loss_and_grad(w, x, y, out=g0)
    l1 = net.loss_and_grad(w, x, y, out=g1, on_layer=lambda: calls.append(1))
    lowest = min(i for i, layer in enumerate(net.layers) if layer.param_shapes and not layer.frozen)
    assert len(calls) == len(net.layers) + len(net.layers) - lowest
    assert l0 == l1
    np.testing.assert_array_equal(g0, g1)


def test_layout_and_views():
    net = load_model("digits_cnn")
    assert [n for n, _, _ in net.layout] == ["conv1.weight", "conv1.bias", "fc1.weight", "fc1.bias",
                                             "fc2.weight", "fc2.bias"]
    offsets = [o for _, o, _ in net.layout]
    sizes = [int(np.prod(s)) for _, _, s in net.layout]
    assert offsets == list(np.cumsum([0] + sizes[:-1])) and sum(sizes) == net.num_params
    assert net.layout[0][2] == (16, 1, 3, 3)


def test_init_params_documented_scheme():
    """He-normal from Generator(PCG64(seed)) in layer order, float64 draw, zero biases."""
    net = load_model("digits_mlp", dtype=np.float64)
    rng = np.random.Generator(np.random.PCG64(5))
    w1 = rng.standard_normal((64, 64)) * np.sqrt(2 / 64)
    w2 = rng.standard_normal((10, 64)) * np.sqrt(2 / 64)
    expect = np.concatenate([w1.ravel(), np.zeros(64), w2.ravel(), np.zeros(10)])
    np.testing.assert_array_equal(net.init_params(5), expect)
    f32 = load_model("digits_mlp", dtype=np.float32).init_params(5)
    assert f32.dtype == np.float32
    np.testing.assert_array_equal(f32, expect.astype(np.float32))
    assert not np.array_equal(net.init_params(6), expect)


def test_pure_function_of_w_and_inputs_untouched():
    net = load_model("digits_cnn", dtype=np.float64)
    w = net.init_params(0)
    x, y = batch(net, 5)
    w0, x0 = w.copy(), x.copy()
    g1, g2 = np.empty_like(w), np.empty_like(w)
    l1 = net.loss_and_grad(w, x, y, out=g1)
    net.forward(w + 1, x)  # another w in between changes nothing
    l2 = net.loss_and_grad(w, x, y, out=g2)
    assert l1 == l2 and np.array_equal(g1, g2)
    assert np.array_equal(w, w0) and np.array_equal(x, x0)
    assert net.loss(w, x, y) == pytest.approx(l1, rel=1e-15)


@pytest.mark.parametrize("name", ["digits_cnn", "mnist_mlp"])
def test_float32_agrees_with_float64(name):
    n64, n32 = load_model(name, np.float64), load_model(name, np.float32)
    w = n64.init_params(0)
    x, y = batch(n64, 8)
    g64, g32 = np.empty_like(w), np.empty(n32.num_params, np.float32)
    l64 = n64.loss_and_grad(w, x, y, out=g64)
    l32 = n32.loss_and_grad(w.astype(np.float32), x.astype(np.float32), y, out=g32)
    assert l32 == pytest.approx(l64, rel=1e-5)
    assert np.linalg.norm(g32 - g64) / np.linalg.norm(g64) < 1e-5


def test_evaluate_counts_accuracy():
    net = load_model("digits_mlp", np.float64)
    w = net.init_params(0)
    x, y = batch(net, 50)
    z = net.forward(w, x)
    loss, acc = net.evaluate(w, x, y, batch=7)
    assert acc == np.mean(np.argmax(z, 1) == y)
    assert loss == pytest.approx(net.loss(w, x, y), rel=1e-12)


def test_wrong_shapes_are_reported():
    net = load_model("digits_mlp")
    w = net.init_params(0)
    with pytest.raises(ValueError, match=r"expects inputs of shape \(N, 1, 8, 8\)"):
        net.forward(w, np.zeros((2, 1, 28, 28), np.float32))
    with pytest.raises(ValueError, match="w must be a float32 vector"):
        net.forward(w.astype(np.float64), np.zeros((2, 1, 8, 8), np.float32))


SPEC = {"name": "t", "input": [1, 4, 4], "classes": 3,
        "layers": [{"type": "flatten"}, {"type": "dense", "units": 3}]}


@pytest.mark.parametrize("change,msg", [
    ({"input": [0, 4, 4]}, "'input' must be"),
    ({"classes": 1}, "'classes' must be"),
    ({"layers": []}, "non-empty"),
    ({"layers": [{"type": "dense", "units": 3}]}, "flatten"),
    ({"layers": [{"type": "flatten"}, {"type": "dense", "units": 4}]}, "declares 3 classes"),
    ({"layers": [{"type": "flatten"}, {"type": "softmax"}]}, "unknown type 'softmax'"),
    ({"layers": [{"type": "flatten"}, {"type": "dense", "unit": 3}]}, "unknown key"),
    ({"layers": [{"type": "flatten"}, {"type": "dense", "units": 3, "frozen": True}]}, "every layer is frozen"),
    ({"colour": "red"}, "unknown key"),
])
def test_spec_errors(change, msg):
    with pytest.raises(RefsgdError, match=msg):
        build({**SPEC, **change})


def test_load_model_errors(tmp_path):
    with pytest.raises(RefsgdError, match="unknown model 'nope'; bundled models: .*mnist_mlp"):
        load_model("nope")
    bad = tmp_path / "bad.toml"
    bad.write_text("name = 'x'\nlayers = [ {type = 'dense'\n")
    with pytest.raises(RefsgdError, match="bad.toml: not valid TOML"):
        load_model(str(bad))
    with pytest.raises(RefsgdError, match="no such file"):
        load_model(str(tmp_path / "missing.toml"))
    good = tmp_path / "good.toml"
    good.write_text('input = [1, 4, 4]\nclasses = 3\nlayers = [{type = "flatten"}, {type = "dense", units = 3}]\n')
    assert load_model(str(good)).num_params == 16 * 3 + 3


# ---------------------------------------------------------------------- torch oracle
@pytest.mark.parametrize("name", MODELS)
def test_gradients_match_torch_autograd(name):
    pytest.importorskip("torch")
    from refsgd import torch_twin

    net = load_model(name, dtype=np.float64)
    w = net.init_params(1)
    w += 0.01 * np.random.default_rng(0).standard_normal(w.shape)
    x, y = batch(net, 4)
    g = np.empty_like(w)
    loss = net.loss_and_grad(w, x, y, out=g)
    tloss, tg = torch_twin.loss_and_grad(torch_twin.build_torch(net), net, w, x, y)
    assert loss == pytest.approx(tloss, rel=1e-12)
    assert np.max(np.abs(g - tg)) <= 1e-10 * np.max(np.abs(tg))
    np.testing.assert_allclose(net.forward(w, x), _torch_logits(torch_twin, net, w, x), rtol=1e-10, atol=1e-12)


def _torch_logits(torch_twin, net, w, x):
    import torch
    model = torch_twin.build_torch(net)
    torch_twin.load_flat(model, net, w)
    with torch.no_grad():
        return model(torch.from_numpy(x)).numpy()
