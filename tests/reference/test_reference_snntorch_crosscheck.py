"""The reference against snnTorch itself: same net, same weights, float64, to 1e-6.

Spikes, membranes (and synaptic currents), loss values and every gradient are
compared for Leaky / Synaptic / RLeaky (all-to-all and one-to-one) x reset
modes x surrogates x losses (population codes included), on sequence and
direct-current input.

Two adaptations make snnTorch run in float64; neither changes its semantics:
* snnTorch's surrogate autograd Functions return `(x > 0).float()`, float32
  even for float64 input, which would round every gradient through a spike to
  float32. We subclass each one so its own forward's output is cast back to
  the input dtype (values are 0/1, exact); the backward is snnTorch's own.
* snntorch.functional and spikegen build some tensors with a module-level
  `dtype = torch.float`; we point that at float64 for the test, and make
  float64 torch's default dtype so beta, threshold and internal zeros are
  float64 too (a float32 beta of 0.9 is not 0.9).
"""

from __future__ import annotations

import numpy as np
import pytest
from _reference_nets import (
    LOSS_CASES,
    MODELS,
    NUM_CLASSES_POP,
    RESETS,
    SURROGATES,
    active_params,
    mixed_net,
    sequence_input,
    targets,
    two_layer_net,
)

from popsnn import Alpha, Lapicque, Leaky, Synaptic, losses, reference, regularizers, surrogate

torch = pytest.importorskip(
    "torch", reason="the snnTorch cross-check needs torch (pip install '.[crosscheck]')"
)
snn = pytest.importorskip(
    "snntorch", reason="the snnTorch cross-check needs snntorch (pip install '.[crosscheck]')"
)
import snntorch.functional as SF  # noqa: E402
import snntorch.functional.loss as snn_loss  # noqa: E402
import snntorch.spikegen as snn_spikegen  # noqa: E402
import snntorch.surrogate as snn_surrogate  # noqa: E402

TOL = 1e-6
T_LONG = 8


@pytest.fixture(autouse=True)
def float64_torch(monkeypatch):
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    monkeypatch.setattr(snn_loss, "dtype", torch.float64)
    monkeypatch.setattr(snn_spikegen, "dtype", torch.float64)
    yield
    torch.set_default_dtype(before)


def _same_dtype(function_class):
    """snnTorch's surrogate Function with its forward's output in the input's dtype."""

    class SameDtype(function_class):
        @staticmethod
        def forward(ctx, input_, *args):
            return function_class.forward(ctx, input_, *args).to(input_.dtype)

    return SameDtype


_FUNCTIONS = {
    "fast_sigmoid": _same_dtype(snn_surrogate.FastSigmoid),
    "atan": _same_dtype(snn_surrogate.ATan),
    "sigmoid": _same_dtype(snn_surrogate.Sigmoid),
    "straight_through": _same_dtype(snn_surrogate.StraightThroughEstimator),
}


def torch_spike_grad(sur):
    fn = _FUNCTIONS[sur.name]
    if sur.name == "straight_through":
        return lambda x: fn.apply(x)
    return lambda x: fn.apply(x, sur.param)


def _t(a):
    return torch.tensor(np.asarray(a), dtype=torch.float64)


class TorchTwin:
    """The popsnn net rebuilt from snnTorch layers with the same parameters."""

    def __init__(self, net, params):
        self.net = net
        self.linears, self.neurons, self.tensors = [], [], []
        for (lin, neuron), p in zip(net.pairs, params):
            fc = torch.nn.Linear(lin.in_features, lin.out_features, bias=lin.bias)
            named = {"weight": fc.weight}
            if lin.bias:
                named["bias"] = fc.bias
            # A trained constant starts from the params' value, as a Parameter of snnTorch's.
            learned = {name: _t(p[name]) for name in neuron.learned()}
            beta = learned.get("beta", None if neuron.beta is None else _t(neuron.beta))
            kw = dict(
                threshold=learned.get("threshold", _t(neuron.threshold)),
                learn_threshold=neuron.learn_threshold,
                reset_mechanism=neuron.reset_mechanism,
                spike_grad=torch_spike_grad(neuron.surrogate),
            )
            if "beta" in learned:
                kw["learn_beta"] = True
            if isinstance(neuron, Leaky):
                cell = snn.Leaky(beta=beta, **kw)
            elif isinstance(neuron, Synaptic):
                cell = snn.Synaptic(alpha=_t(neuron.alpha), beta=beta, **kw)
            elif isinstance(neuron, Alpha):
                cell = snn.Alpha(alpha=_t(neuron.alpha), beta=beta, **kw)
            elif isinstance(neuron, Lapicque):  # snnTorch derives its update from R and C
                R, C = neuron.resistance_capacitance()
                cell = snn.Lapicque(R=_t(R), C=_t(C), time_step=_t(neuron.time_step), **kw)
            elif neuron.all_to_all:
                cell = snn.RLeaky(beta=beta, linear_features=lin.out_features, **kw)
                named["recurrent_weight"] = cell.recurrent.weight
                named["recurrent_bias"] = cell.recurrent.bias
            else:
                cell = snn.RLeaky(beta=beta, V=_t(p["recurrent_weight"]), all_to_all=False, **kw)
                named["recurrent_weight"] = cell.V
            cell.to(torch.float64)
            named.update({name: getattr(cell, name) for name in learned})
            with torch.no_grad():
                for key, tensor in named.items():
                    tensor.copy_(_t(p[key]))
            self.linears.append(fc)
            self.neurons.append(cell)
            self.tensors.append(named)

    def run(self, x, num_steps):
        x = _t(x)
        T = num_steps
        out = {
            "spikes": [[] for _ in self.neurons],
            "membranes": [[] for _ in self.neurons],
            "currents": [[] for _ in self.neurons],
        }
        for t in range(T):
            inp = x if x.dim() == 2 else x[t]
            for l, (fc, cell) in enumerate(zip(self.linears, self.neurons)):
                res = cell(fc(inp))
                spk, mem = res[0], res[-1]
                out["spikes"][l].append(spk)
                out["membranes"][l].append(mem)
                if isinstance(cell, (snn.Synaptic, snn.Alpha)):  # J, or Alpha's syn_inh H
                    out["currents"][l].append(res[1] if isinstance(cell, snn.Synaptic) else res[2])
                inp = spk
        return {k: [torch.stack(v) if v else None for v in lists] for k, lists in out.items()}


def torch_loss(loss, num_steps):
    if loss.name == "ce_count":
        return SF.ce_count_loss(
            population_code=loss.population_code, num_classes=loss.num_classes or False
        )
    if loss.name == "ce_rate":
        return SF.ce_rate_loss()
    if loss.name == "mse_count":
        return SF.mse_count_loss(
            correct_rate=loss.correct_rate,
            incorrect_rate=loss.incorrect_rate,
            population_code=loss.population_code,
            num_classes=loss.num_classes or False,
        )
    if loss.name == "mse_membrane":
        return SF.mse_membrane_loss(on_target=loss.on_target, off_target=loss.off_target)
    if loss.name == "ce_max_membrane":
        return SF.ce_max_membrane_loss()
    raise ValueError(loss.name)


def torch_spike_count_bounds(reg, spikes):
    """Perez-Nieves & Goodman's regulariser written in torch on [T, B, n] spikes."""
    counts = spikes.sum(0)
    n, batch = counts.shape[1], counts.shape[0]
    over = torch.clamp(counts.mean(1) - reg.upper, min=0.0) ** reg.upper_power
    under = torch.clamp(reg.lower - counts, min=0.0) ** 2
    return (reg.lambda_upper * over.sum() + reg.lambda_lower / n * under.sum()) / batch


def crosscheck(net, loss, seed=0, direct=False, steps=T_LONG, regularizer=None):
    params = active_params(net, seed)
    x = sequence_input(seed + 10, steps=steps)
    if direct:
        x = x[0]
    y = targets(seed + 20, num_classes=loss.num_classes or net.num_outputs)
    value, grads, rec = reference.loss_and_grad(
        net, params, x, y, loss, num_steps=steps, regularizer=regularizer
    )

    twin = TorchTwin(net, params)
    out = twin.run(x, steps)
    torch_value = torch_loss(loss, steps)(
        out["spikes" if loss.uses == "spikes" else "membranes"][-1], torch.as_tensor(y)
    ).sum()
    if regularizer is not None:
        for hidden in out["spikes"][:-1]:
            torch_value = torch_value + torch_spike_count_bounds(regularizer, hidden)
    torch_value.backward()

    for l in range(len(net)):
        np.testing.assert_array_equal(
            rec.spikes[l], out["spikes"][l].detach().numpy(), err_msg=f"spikes of layer {l}"
        )
        np.testing.assert_allclose(
            rec.membranes[l],
            out["membranes"][l].detach().numpy(),
            rtol=0,
            atol=TOL,
            err_msg=f"membranes of layer {l}",
        )
        if rec.currents[l] is not None:
            np.testing.assert_allclose(
                rec.currents[l],
                out["currents"][l].detach().numpy(),
                rtol=0,
                atol=TOL,
                err_msg=f"currents of layer {l}",
            )
    assert abs(value - float(torch_value.detach().sum())) < TOL
    for l, named in enumerate(twin.tensors):
        assert sorted(named) == sorted(grads[l])
        for key, tensor in named.items():
            # torch leaves .grad None for a tensor the loss does not reach (the output layer's
            # threshold under a membrane loss without the subtract reset): a zero gradient.
            theirs = np.zeros(tensor.shape) if tensor.grad is None else tensor.grad.numpy()
            np.testing.assert_allclose(
                grads[l][key],
                theirs,
                rtol=TOL,
                atol=TOL,
                err_msg=f"gradient of layer {l} {key}",
            )
    # The comparison is only worth something if the net fired.
    assert all(0 < s.mean() < 1 for s in rec.spikes[:-1])
    return rec


@pytest.mark.parametrize("loss_name", sorted(LOSS_CASES))
@pytest.mark.parametrize("reset", RESETS)
@pytest.mark.parametrize("model", MODELS)
def test_models_resets_losses_match_snntorch(model, reset, loss_name):
    sur = SURROGATES[(MODELS.index(model) + 2 * RESETS.index(reset)) % len(SURROGATES)]
    crosscheck(two_layer_net(model, reset, sur), LOSS_CASES[loss_name]())


@pytest.mark.parametrize("loss_name", ["ce_count", "mse_membrane"])
@pytest.mark.parametrize("sur", SURROGATES)
@pytest.mark.parametrize("model", MODELS)
def test_surrogates_match_snntorch(model, sur, loss_name):
    crosscheck(two_layer_net(model, "subtract", sur), LOSS_CASES[loss_name](), seed=3)


@pytest.mark.parametrize("model", MODELS)
def test_direct_current_matches_snntorch(model):
    crosscheck(two_layer_net(model, "zero", "fast_sigmoid"), LOSS_CASES["mse_count"](), direct=True)


def test_mixed_three_layer_net_matches_snntorch():
    crosscheck(mixed_net("atan"), losses.ce_rate_loss(), steps=12)


def test_population_code_with_wide_output_matches_snntorch():
    net = two_layer_net("leaky", "subtract", "atan", n_out=3 * NUM_CLASSES_POP * 2)
    for loss in (
        losses.ce_count_loss(population_code=True, num_classes=4),
        losses.mse_count_loss(0.7, 0.1, population_code=True, num_classes=3),
    ):
        crosscheck(net, loss, seed=5)


def test_accuracy_matches_snntorch():
    rng = np.random.default_rng(0)
    spikes = (rng.random((5, 64, 6)) < 0.3).astype(np.float64)
    y = rng.integers(0, 6, 64)
    assert losses.accuracy(spikes, y) == pytest.approx(
        SF.accuracy_rate(torch.tensor(spikes), torch.tensor(y))
    )
    y3 = rng.integers(0, 3, 64)
    assert losses.accuracy(spikes, y3, num_classes=3) == pytest.approx(
        SF.accuracy_rate(
            torch.tensor(spikes), torch.tensor(y3), population_code=True, num_classes=3
        )
    )


def test_latency_matches_snntorch_with_clip():
    from popsnn import encoders

    x = np.random.default_rng(1).random((16, 20))
    x[0, :4] = [0.0, 0.005, 0.0099, 1.0]
    ours = encoders.latency(x, 25, tau=5.0, threshold=0.01)
    theirs = snn_spikegen.latency(
        torch.tensor(x), num_steps=25, tau=5.0, threshold=0.01, clip=True, bypass=True
    ).numpy()
    np.testing.assert_array_equal(ours, theirs)


def test_mse_membrane_negative_off_target_is_a_documented_difference():
    """snnTorch builds the target as clamp(one_hot * on, min=off), so an off target below 0
    becomes 0; popsnn uses the off target as given. Pin both behaviours."""
    mem = np.random.default_rng(2).normal(size=(4, 3, 5))
    y = np.array([0, 4, 2])
    theirs = float(
        SF.mse_membrane_loss(on_target=1.0, off_target=-0.5)(
            torch.tensor(mem), torch.tensor(y)
        ).sum()
    )
    assert theirs == pytest.approx(losses.mse_membrane_loss(1.0, 0.0)(None, mem, y), abs=TOL)
    ours = losses.mse_membrane_loss(1.0, -0.5)(None, mem, y)
    target = np.full((3, 5), -0.5)
    target[np.arange(3), y] = 1.0
    assert ours == pytest.approx(((mem - target) ** 2).mean(), rel=1e-14)


def _masked(function_class, rule, threshold):
    """snnTorch's surrogate Function with its gradient multiplied by a sparse rule's mask:
    what a user would write in snnTorch to get popsnn's sparse backward."""
    base = _same_dtype(function_class)

    class Masked(base):
        @staticmethod
        def backward(ctx, grad_output):
            (input_,) = ctx.saved_tensors
            grads = function_class.backward(ctx, grad_output)
            mask = torch.from_numpy(rule.mask((input_ + threshold).numpy(), threshold))
            return (grads[0] * mask,) + tuple(grads[1:])

    return Masked


# The masked surrogate below knows one threshold (1.0); models with a threshold per neuron
# are checked with sparse rules against finite differences (test_reference_gradients.py).
UNIFORM_THRESHOLD = [m for m in MODELS if m not in ("leaky_learn", "rleaky_learn")]


@pytest.mark.parametrize("rule_name", ["window", "one_sided"])
@pytest.mark.parametrize("model", UNIFORM_THRESHOLD)
def test_sparse_rules_match_snntorch_with_a_masked_surrogate(model, rule_name, monkeypatch):
    from popsnn import sparse

    rule = sparse.window(0.3) if rule_name == "window" else sparse.one_sided(0.8)
    masked = _masked(snn_surrogate.FastSigmoid, rule, 1.0)
    monkeypatch.setitem(_FUNCTIONS, "fast_sigmoid", masked)
    rec = crosscheck(
        two_layer_net(model, "subtract", "fast_sigmoid", rule), LOSS_CASES["ce_count"](), seed=1
    )
    assert all(0 < m.mean() < 1 for m in rec.grad_masks)


def _both_bounds_active(net, seed):
    """Bounds at which, on crosscheck's input, some samples are over the upper bound and
    some neurons under the lower one (both terms and both sides of each are exercised)."""
    x = sequence_input(seed + 10, steps=T_LONG)
    spikes = reference.forward(net, active_params(net, seed), x).spikes[0]
    counts = spikes.sum(0)
    upper = float(np.median(counts.mean(1)))
    lower = float(np.percentile(counts, 30)) + 0.5
    return regularizers.spike_count_bounds(
        upper=upper, lambda_upper=0.3, lower=lower, lambda_lower=2.0, upper_power=2.0
    )


@pytest.mark.parametrize("rule_name", [None, "window"])
@pytest.mark.parametrize("model", ["leaky", "synaptic"])
def test_spike_count_regularizer_matches_torch_autograd(model, rule_name, monkeypatch):
    from popsnn import sparse

    rule = sparse.window(0.3) if rule_name else None
    if rule is not None:
        monkeypatch.setitem(
            _FUNCTIONS, "fast_sigmoid", _masked(snn_surrogate.FastSigmoid, rule, 1.0)
        )
    net = two_layer_net(model, "subtract", "fast_sigmoid", rule)
    reg = _both_bounds_active(net, seed=1)
    crosscheck(net, LOSS_CASES["ce_count"](), seed=1, regularizer=reg)
    # the regulariser changed the gradient (a check that it is not silently dropped)
    params = active_params(net, 1)
    x, y = sequence_input(11, steps=T_LONG), targets(21, num_classes=net.num_outputs)
    plain = reference.loss_and_grad(net, params, x, y, "ce_count", num_steps=T_LONG)[1]
    regd = reference.loss_and_grad(
        net, params, x, y, "ce_count", num_steps=T_LONG, regularizer=reg
    )[1]
    assert np.abs(plain[0]["weight"] - regd[0]["weight"]).max() > 1e-6


# Far from threshold, both signs: |U - threshold| from 0.05 to 60, as float32 values so
# that both precisions evaluate the very same points.
_TAILS32 = np.concatenate([-np.geomspace(0.05, 60, 48), np.geomspace(0.05, 60, 48)]).astype(
    np.float32
)
_TINY32 = np.finfo(np.float32).tiny
TAIL_SURROGATES = [
    surrogate.fast_sigmoid(25.0),
    surrogate.fast_sigmoid(100.0),
    surrogate.atan(2.0),
    surrogate.sigmoid(25.0),
    surrogate.sigmoid(5.0),
    surrogate.straight_through(),
]


def snntorch_surrogate_grad(sur, x, dtype):
    """dS/dU of snnTorch's own autograd Function at x, computed in `dtype`."""
    xt = torch.tensor(x, dtype=dtype, requires_grad=True)
    torch_spike_grad(sur)(xt).sum().backward()
    return xt.grad.numpy()


@pytest.mark.parametrize("sur", TAIL_SURROGATES, ids=lambda s: f"{s.name}-{s.param:g}")
def test_surrogate_tails_match_snntorch_in_float32_and_float64(sur):
    x32 = _TAILS32
    x64 = x32.astype(np.float64)
    # snnTorch's sigmoid computes e^(-kx), which overflows for very negative x (it returns
    # 0 or NaN there); the function is even, so its value at |x| is the accurate one.
    at = np.abs(x64) if sur.name == "sigmoid" else x64
    exact = snntorch_surrogate_grad(sur, at, torch.float64)
    got64 = sur.grad(x64)
    assert got64.dtype == np.float64
    np.testing.assert_allclose(got64, exact, rtol=1e-12, atol=0)

    got32 = sur.grad(x32)
    assert got32.dtype == np.float32 and np.all(np.isfinite(got32)) and np.all(got32 >= 0)
    normal = exact >= _TINY32
    # Every value that float32 can hold as a normal number, to float32 precision (e^z
    # with z up to 87 carries a relative error of about 87 float32 ulps of z).
    np.testing.assert_allclose(got32[normal], exact[normal], rtol=2e-5, atol=0)
    assert np.all(got32[~normal] < _TINY32)
    # And snnTorch itself in float32, wherever its float32 result has not over- or underflowed.
    snn32 = snntorch_surrogate_grad(sur, x32, torch.float32)
    usable = np.isfinite(snn32) & (snn32 >= _TINY32)
    assert usable.sum() >= x32.size // 2
    np.testing.assert_allclose(got32[usable], snn32[usable], rtol=2e-5, atol=0)
