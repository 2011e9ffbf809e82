"""LifForward over half storage (LifForward<Neuron, Reset, Rule, half>, docs/numerics.md
section 8 step 4), run alone on popsnn's CPU runtime (tests/engine/half_vertices/lif_forward)
for every neuron model: two layers, direct current then the first layer's spike ids, against
popsnn.reference.forward(..., storage="float16"), which rounds where the device stores (I, U,
J / E, H, the surrogate trace). The float forms under the same harness against the float32
reference."""

import subprocess

import numpy as np
import pytest
from engine_helpers import build_against_installed
from test_engine_half_vertices import SOURCE

import popsnn
from popsnn import reference, sparse
from popsnn.backends.engine import _layer_spec
from popsnn.precision import rounding

T, B, N_IN, N0, N1 = 12, 5, 20, 24, 10
SURROGATES = {"fast_sigmoid": 0, "atan": 1, "sigmoid": 2, "straight_through": 3}
UNITS = {"Leaky": "Leaky", "Synaptic": "Synaptic", "Lapicque": "Lapicque", "Alpha": "Alpha"}
RESETS = {"subtract": "ResetSubtract", "zero": "ResetZero", "none": "ResetNone"}
RULES = {None: "NoRule", "window": "Window", "one_sided": "OneSided"}

NEURONS = {
    "leaky-subtract": lambda: popsnn.Leaky(beta=0.85),
    "leaky-zero": lambda: popsnn.Leaky(beta=0.85, reset_mechanism="zero"),
    "leaky-none-atan": lambda: popsnn.Leaky(beta=0.7, reset_mechanism="none", surrogate="atan"),
    "synaptic-subtract": lambda: popsnn.Synaptic(alpha=0.6, beta=0.8),
    "synaptic-zero-sigmoid": lambda: popsnn.Synaptic(
        alpha=0.6, beta=0.8, reset_mechanism="zero", surrogate="sigmoid"
    ),
    "rleaky-all-subtract": lambda: popsnn.RLeaky(beta=0.8),
    "rleaky-one-zero": lambda: popsnn.RLeaky(beta=0.8, all_to_all=False, reset_mechanism="zero"),
    "lapicque-subtract": lambda: popsnn.Lapicque(beta=0.85, C=0.5),
    "alpha-subtract": lambda: popsnn.Alpha(alpha=0.8, beta=0.7),
    "alpha-zero": lambda: popsnn.Alpha(alpha=0.8, beta=0.7, reset_mechanism="zero"),
    "leaky-window": lambda: popsnn.Leaky(beta=0.85, sparse=sparse.window(0.4)),
    "leaky-one-sided": lambda: popsnn.Leaky(beta=0.85, sparse=sparse.one_sided(0.3)),
    # The constants one per neuron: the vertex's generic rows (NeuronConstantRows).
    "leaky-per-neuron": lambda n: popsnn.Leaky(
        beta=np.linspace(0.6, 0.95, n), threshold=np.linspace(0.8, 1.2, n)
    ),
    "synaptic-per-neuron": lambda n: popsnn.Synaptic(
        alpha=np.linspace(0.5, 0.7, n), beta=np.linspace(0.6, 0.95, n)
    ),
    "alpha-per-neuron-zero": lambda n: popsnn.Alpha(
        alpha=np.linspace(0.85, 0.95, n), beta=np.linspace(0.6, 0.8, n), reset_mechanism="zero"
    ),
}


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    return build_against_installed(SOURCE, tmp_path_factory.mktemp("lif_forward")) / "lif_forward"


def _unit(neuron):
    name = type(neuron).__name__
    if name == "RLeaky":
        return "RLeakyAllToAll" if neuron.all_to_all else "RLeakyOneToOne"
    return UNITS[name]


def _recurrence(neuron):
    if type(neuron).__name__ != "RLeaky":
        return 0
    return 1 if neuron.all_to_all else 2


def _states(neuron):
    return {"Synaptic": 2, "Alpha": 3}.get(type(neuron).__name__, 1)


def _run(harness, tmp_path, stored, net, params, x, compressed, loss_grads=None):
    """Each layer's (spikes, membranes, dense surrogate trace) [T, B, n] from the vertices.
    With loss_grads (the output layer's dL/dS, dL/dU [T, B, N1]), the backward too: then also
    the gradients read by `read_grads` (test_engine_half_backward.py)."""
    dtype = np.float16 if stored == "half" else np.float32
    arrays = {"x": x, "l0_w": params[0]["weight"].T, "l0_b": params[0]["bias"]}
    arrays |= {"l1_w": params[1]["weight"].T, "l1_b": params[1]["bias"]}
    neuron = net.stages[0].neuron
    for l in (0, 1):
        if _recurrence(neuron) == 1:  # V [N, N] as rows per source neuron, and its bias
            arrays[f"l{l}_v"] = params[l]["recurrent_weight"].T
            arrays[f"l{l}_c"] = params[l]["recurrent_bias"]
        elif _recurrence(neuron) == 2:
            arrays[f"l{l}_v"] = params[l]["recurrent_weight"]
    if loss_grads is not None:
        arrays |= {"l1_dS": loss_grads[0], "l1_dU": loss_grads[1]}
    for name, a in arrays.items():
        np.ascontiguousarray(a, dtype).tofile(tmp_path / f"{name}.bin")
    spec = _layer_spec(*net.pairs[0])
    per_neuron = bool(neuron.per_neuron_constants())
    for l, stage in enumerate(net.stages):  # float: constants are not rounded
        n, nr = stage.num_neurons, stage.neuron
        for name, value in (("betas", nr.beta), ("alphas", getattr(nr, "alpha", 0.0))):
            np.broadcast_to(np.float32(value), (n,)).tofile(tmp_path / f"l{l}_{name}.bin")
        np.broadcast_to(np.float32(nr.threshold), (n,)).tofile(tmp_path / f"l{l}_thresholds.bin")
    if per_neuron:  # the scalar fields go unread
        spec = dict(spec, beta=0.0, alpha=0.0, gain=1.0, threshold=0.0)
    rule = None if neuron.sparse is None else neuron.sparse.kind
    rule_unit = RULES[rule] if compressed or rule is None else RULES[rule] + "Dense"
    args = [stored, _unit(neuron), RESETS[neuron.reset_mechanism], rule_unit, int(compressed)]
    args += [_recurrence(neuron), T, B, N_IN, N0, N1]
    args += [spec["beta"], spec.get("alpha", 0.0), spec.get("gain", 1.0), spec["threshold"]]
    args += [SURROGATES[neuron.surrogate.name], neuron.surrogate.param]
    args += [0.0 if neuron.sparse is None else neuron.sparse.value, _states(neuron)]
    learned = getattr(neuron, "learn_beta", False) or neuron.learn_threshold
    args += [2 if learned else int(per_neuron), int(loss_grads is not None)]
    run = subprocess.run(
        [str(harness), str(tmp_path)] + [repr(a) if isinstance(a, float) else str(a) for a in args],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    out = []
    for l, n in ((0, N0), (1, N1)):

        def read(name, dt=dtype, l=l):
            return np.fromfile(tmp_path / f"l{l}_{name}.bin", dt)

        assert not read("overflow", np.uint32)[0], "the harness sized every buffer"
        shape = (T, B, n)
        values = read("surrogates")
        if compressed:  # the gradient trace back to a dense [T, B, n]
            starts, ids = read("starts", np.int32), read("ids", np.uint16)
            dense = np.zeros(T * B * n, dtype)
            for row in range(T * B):
                k = np.arange(starts[row], starts[row + 1])
                dense[row * n + ids[k]] = values[k]
            values = dense
        out.append(
            (read("spikes").reshape(shape), read("membranes").reshape(shape), values.reshape(shape))
        )
    return out


def _reference(net, params, x, storage):
    """Each layer's (spikes, membranes, stored masked surrogate) from popsnn.reference."""
    rec = reference.forward(net, params, x, T, storage)
    store = rounding(storage)
    out = []
    for l, stage in enumerate(net.stages):
        theta = np.asarray(stage.neuron.threshold, np.float32)
        U = rec.membranes[l]
        sg = store(stage.neuron.surrogate.grad(U - theta)) * rec.grad_masks[l]
        out.append((rec.spikes[l], U, sg))
    return out


def _net(make):
    if "n" in make.__code__.co_varnames:  # one constant per neuron: sized per layer
        return popsnn.Sequential(popsnn.Linear(N_IN, N0), make(N0), popsnn.Linear(N0, N1), make(N1))
    return popsnn.Sequential(popsnn.Linear(N_IN, N0), make(), popsnn.Linear(N0, N1), make())


def _case(name, seed=0):
    net = _net(NEURONS[name])
    params = net.init_params(seed)
    params[0]["weight"] = params[0]["weight"] * np.float32(2.5)  # a busy hidden layer
    rng = np.random.default_rng(seed)
    x = (rng.uniform(0, 1.5, (B, N_IN)) * (rng.random((B, N_IN)) < 0.6)).astype(np.float32)
    return net, params, x


def _first_flip_is_at_threshold(eng, ref, theta):
    """Spikes the engine and the reference decide differently are first at a step where the
    reference's U lies within a few half ulps of the threshold (a rounding apart)."""
    diff = eng[0] != ref[0]
    u_r = ref[1]
    t = int(np.argmax(diff.any(axis=(1, 2))))
    theta = np.broadcast_to(theta, u_r[t].shape)[diff[t]]
    near = np.abs(u_r[t][diff[t]] - theta) <= 4 * 2.0**-11 * np.maximum(1.0, np.abs(theta))
    assert near.all(), f"step {t}: a spike flipped away from the threshold"
    return t


# Every model on the dense trace; the sparse rules in both layouts.
CASES = [(name, False) for name in sorted(NEURONS)] + [
    ("leaky-window", True),
    ("leaky-one-sided", True),
]


@pytest.mark.parametrize(
    ("name", "compressed"), CASES, ids=[f"{n}-{'compressed' if c else 'dense'}" for n, c in CASES]
)
def test_half_forward_matches_the_half_reference(harness, tmp_path, name, compressed):
    net, params, x = _case(name)
    x = x.astype(np.float16).astype(np.float32)
    engine = _run(harness, tmp_path, "half", net, params, x, compressed)
    ref = _reference(net, params, x, "float16")
    assert ref[0][0].sum() > 0 and ref[1][0].sum() > 0, "silent layers test nothing"
    for l, (eng, want) in enumerate(zip(engine, ref)):
        theta = np.asarray(net.stages[l].neuron.threshold, np.float32)
        steps = T
        if not np.array_equal(eng[0], want[0]):
            steps = _first_flip_is_at_threshold(eng, want, theta)
            # The layer above reads the flipped spikes: compare it up to there only.
            if l == 0:
                engine, ref = engine[:1], ref[:1]
        s_e, u_e, g_e = (a[:steps].astype(np.float32) for a in eng)
        s_r, u_r, g_r = (a[:steps] for a in want)
        np.testing.assert_array_equal(s_e, s_r)
        # Every value is a half; where the float sums' orders part at a half tie, I (and so
        # U) differ by an ulp: most entries are equal, all within 2e-2.
        np.testing.assert_allclose(u_e, u_r, atol=2e-2)
        same = u_e == u_r
        assert np.mean(same) > 0.9, f"layer {l}: membranes equal in few entries"
        # The stored surrogate of the same stored U: the same half, or one ulp apart where the
        # float evaluations of exp / atan part at a half tie; zero at the same entries.
        np.testing.assert_allclose(g_e[same], g_r[same], rtol=2.0**-10, atol=2.0**-24)
        np.testing.assert_array_equal(g_e[same] == 0, g_r[same] == 0)
        if len(engine) == 1:
            break


@pytest.mark.parametrize(
    "name",
    [
        "leaky-subtract",
        "synaptic-subtract",
        "alpha-subtract",
        "rleaky-all-subtract",
        "leaky-window",
    ],
)
def test_float_forward_under_its_stored_type_name_matches_float32(harness, tmp_path, name):
    net, params, x = _case(name, seed=1)
    engine = _run(harness, tmp_path, "float", net, params, x, False)
    ref = _reference(net, params, x, None)
    for eng, want in zip(engine, ref):
        np.testing.assert_array_equal(eng[0], want[0])
        np.testing.assert_allclose(eng[1], want[1], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(eng[2], want[2], rtol=1e-5, atol=1e-7)


def test_half_states_are_rounded_where_the_reference_stores_them(harness, tmp_path):
    # Synaptic: J is rounded before U reads it. The half run differs from float32 storage
    # (so the rounding is there) and is exactly the half reference where no spike flips.
    net, params, x = _case("synaptic-subtract", seed=2)
    x = x.astype(np.float16).astype(np.float32)
    engine = _run(harness, tmp_path, "half", net, params, x, False)
    half, full = _reference(net, params, x, "float16"), _reference(net, params, x, None)
    u_e = engine[0][1].astype(np.float32)
    assert np.mean(u_e == half[0][1]) > 0.9
    assert np.mean(u_e == full[0][1]) < 0.5
