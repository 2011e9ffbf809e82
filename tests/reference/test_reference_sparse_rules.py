"""The sparse-backward rules: exact masks on hand-made membranes, exact zeros in the gradient."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pytest
from _reference_nets import MODELS, active_params, sequence_input, targets, two_layer_net

import popsnn
from popsnn import reference, sparse
from popsnn.sparse import SparseRule
from popsnn.surrogate import Surrogate


def test_window_mask_by_hand():
    u = np.array([0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, -1.0])  # exact in binary
    # active iff |u - 1| < 0.5 (strict: 0.5 and 1.5 are out)
    expect = [False, False, True, True, True, False, False, False]
    np.testing.assert_array_equal(sparse.window(0.5).mask(u, 1.0), expect)


def test_one_sided_mask_by_hand():
    u = np.array([0.89, 0.9, 0.95, 1.0, 3.0, -2.0])
    # active iff u >= 0.9 (inclusive), spikes above threshold included
    np.testing.assert_array_equal(
        sparse.one_sided(0.9).mask(u, 1.0), [False, True, True, True, True, False]
    )


RULES = [sparse.window(0.3), sparse.one_sided(0.8)]


@pytest.mark.parametrize("rule", RULES, ids=["window", "one_sided"])
@pytest.mark.parametrize("model", MODELS)
def test_record_mask_is_the_rule_on_the_membranes(model, rule):
    net = two_layer_net(model, rule=rule)
    rec = reference.forward(net, active_params(net), sequence_input())
    for (_, neuron), u, m in zip(net.pairs, rec.membranes, rec.grad_masks):
        np.testing.assert_array_equal(m, rule.mask(u, np.asarray(neuron.threshold)))
        assert 0 < m.mean() < 1  # the rule really splits the entries


@dataclass(frozen=True)
class MaskedSurrogate(Surrogate):
    """A dense-backward surrogate multiplied by a rule's mask (x = U - threshold)."""

    rule: SparseRule = None
    threshold: float = 1.0

    def grad(self, x):
        return super().grad(x) * self.rule.mask(x + self.threshold, self.threshold)


def with_masked_surrogate(net, rule):
    """The same net, dense, each surrogate replaced by surrogate * rule mask."""
    layers = []
    for lin, neuron in net.pairs:
        sur = neuron.surrogate
        masked = MaskedSurrogate(sur.name, sur.param, rule, neuron.threshold)
        layers += [lin, replace(neuron, sparse=None, surrogate=masked)]
    return popsnn.Sequential(*layers)


@pytest.mark.parametrize("rule", RULES, ids=["window", "one_sided"])
@pytest.mark.parametrize("model", MODELS)
def test_sparse_gradient_is_the_dense_one_with_a_masked_surrogate(model, rule):
    net = two_layer_net(model, "subtract", "fast_sigmoid", rule)
    params = active_params(net, 3)
    x, y = sequence_input(4), targets(5)
    _, grads, _ = reference.loss_and_grad(net, params, x, y, "ce_count")
    _, expect, _ = reference.loss_and_grad(
        with_masked_surrogate(net, rule), params, x, y, "ce_count"
    )
    _, dense, _ = reference.loss_and_grad(
        two_layer_net(model, "subtract", "fast_sigmoid"), params, x, y, "ce_count"
    )
    for g, e in zip(grads, expect):
        for k in g:
            np.testing.assert_allclose(g[k], e[k], rtol=1e-12, atol=1e-15, err_msg=k)
    assert not np.allclose(grads[0]["weight"], dense[0]["weight"])  # the mask mattered


@pytest.mark.parametrize("rule", RULES, ids=["window", "one_sided"])
def test_entries_off_the_mask_get_exactly_zero(rule):
    """With beta = 0 and one sample, the bias gradient of a backward fed dL/dS at one step t
    only is dI[t] = surrogate * mask * dL/dS[t], entry by entry: exactly zero off the mask."""
    neuron = popsnn.Leaky(beta=0.0, sparse=rule, surrogate=popsnn.surrogate.atan())
    net = popsnn.Sequential(popsnn.Linear(1, 6), neuron)
    params = net.init_params(0, dtype=np.float64)
    params[0]["weight"][:] = np.linspace(0.2, 1.6, 6)[:, None]
    params[0]["bias"][:] = 0.0
    x = np.linspace(0.3, 1.3, 8)[:, None, None]
    rec = reference.forward(net, params, x)
    d_s = np.random.default_rng(0).normal(size=rec.spikes[0].shape)
    sur = popsnn.surrogate.atan().grad(rec.membranes[0] - 1.0)
    for t in range(x.shape[0]):
        only_t = d_s * (np.arange(x.shape[0]) == t)[:, None, None]
        d_input = reference.backward(net, params, rec, only_t)[0]["bias"]
        mask = rec.grad_masks[0][t, 0]
        np.testing.assert_allclose(
            d_input, (sur * rec.grad_masks[0] * d_s)[t, 0], rtol=1e-15, atol=0
        )
        assert np.all(d_input[~mask] == 0.0) and np.all(d_input[mask] != 0.0)
    assert 0 < rec.grad_masks[0].mean() < 1
