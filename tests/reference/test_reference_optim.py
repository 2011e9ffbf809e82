"""popsnn.optim against torch.optim on the same gradients, over several steps."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

from popsnn import optim

torch = pytest.importorskip(
    "torch", reason="the optimiser cross-check needs torch (pip install '.[crosscheck]')"
)

STEPS = 6


def problem(seed=0):
    rng = np.random.default_rng(seed)
    params = [
        {"weight": rng.normal(size=(4, 3)), "bias": rng.normal(size=4)},
        {"weight": rng.normal(size=(2, 4)), "recurrent_weight": rng.normal(size=2)},
    ]
    grads = [
        [{k: rng.normal(size=v.shape) for k, v in p.items()} for p in params] for _ in range(STEPS)
    ]
    return params, grads


CASES = [
    ("sgd", dict(lr=0.1)),
    ("sgd", dict(lr=0.1, momentum=0.9)),
    ("sgd", dict(lr=0.05, momentum=0.8, dampening=0.3, weight_decay=0.01)),
    ("sgd", dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.1)),
    ("adam", dict(lr=1e-2)),
    ("adam", dict(lr=1e-2, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.05)),
    ("adamw", dict(lr=1e-2)),
    ("adamw", dict(lr=3e-2, betas=(0.5, 0.9), weight_decay=0.2)),
]
TORCH = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam, "adamw": torch.optim.AdamW}


@pytest.mark.parametrize("name,kwargs", CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
def test_matches_torch_over_several_steps(name, kwargs):
    params, grads = problem()
    tensors = [{k: torch.tensor(v, requires_grad=True) for k, v in p.items()} for p in params]
    flat = [t for p in tensors for t in p.values()]
    reference_opt = TORCH[name](flat, **kwargs)
    ours = optim.get(name, **kwargs)
    for step_grads in grads:
        for p, g in zip(tensors, step_grads):
            for k in p:
                p[k].grad = torch.tensor(g[k])
        reference_opt.step()
        ours.step(params, step_grads)
        for p, t in zip(params, tensors):
            for k in p:
                np.testing.assert_allclose(p[k], t[k].detach().numpy(), rtol=1e-12, atol=1e-14)


def test_defaults_are_torchs():
    for name, cls in (("adam", torch.optim.Adam), ("adamw", torch.optim.AdamW)):
        d = cls([torch.zeros(1, requires_grad=True)]).defaults
        ours = optim.get(name).hyper
        assert ours["lr"] == d["lr"] and tuple(ours["betas"]) == tuple(d["betas"])
        assert ours["eps"] == d["eps"] and ours["weight_decay"] == d["weight_decay"]
    d = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1).defaults
    ours = optim.SGD(0.1).hyper
    for k in ("momentum", "dampening", "weight_decay", "nesterov"):
        assert ours[k] == d[k]


def test_float32_params_stay_float32_and_track_torch():
    params, grads = problem(1)
    params = [{k: v.astype(np.float32) for k, v in p.items()} for p in params]
    tensors = [{k: torch.tensor(v, requires_grad=True) for k, v in p.items()} for p in params]
    reference_opt = torch.optim.AdamW([t for p in tensors for t in p.values()], lr=1e-2)
    ours = optim.AdamW(lr=1e-2)
    for step_grads in grads:
        g32 = [{k: v.astype(np.float32) for k, v in g.items()} for g in step_grads]
        for p, g in zip(tensors, g32):
            for k in p:
                p[k].grad = torch.tensor(g[k])
        reference_opt.step()
        ours.step(params, g32)
    for p, t in zip(params, tensors):
        for k in p:
            assert p[k].dtype == np.float32
            np.testing.assert_allclose(p[k], t[k].detach().numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name,kwargs", [CASES[2], CASES[5], CASES[7]])
def test_state_dict_round_trip_resumes_identically(name, kwargs):
    params, grads = problem(2)
    a = optim.get(name, **kwargs)
    for g in grads[:3]:
        a.step(params, g)
    saved = pickle.loads(pickle.dumps(a.state_dict()))
    params_b = copy.deepcopy(params)
    b = optim.get(name, **kwargs)
    b.load_state_dict(saved)
    for g in grads[3:]:
        a.step(params, g)
        b.step(params_b, g)
    for p, q in zip(params, params_b):
        for k in p:
            np.testing.assert_array_equal(p[k], q[k])


def test_state_dict_holds_only_numpy_and_plain_values():
    params, grads = problem()
    opt = optim.Adam()
    opt.step(params, grads[0])

    def plain(obj):
        if isinstance(obj, dict):
            return all(isinstance(k, str) and plain(v) for k, v in obj.items())
        if isinstance(obj, (list, tuple)):
            return all(plain(v) for v in obj)
        return isinstance(obj, (np.ndarray, int, float, bool, str))

    assert plain(opt.state_dict())


def test_state_dict_is_a_copy():
    params, grads = problem()
    opt = optim.SGD(0.1, momentum=0.9)
    opt.step(params, grads[0])
    d = opt.state_dict()
    d["state"][0][2]["momentum_buffer"][:] = 123.0
    assert not np.any(opt.state[(0, "weight")]["momentum_buffer"] == 123.0)
