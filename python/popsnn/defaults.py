"""popsnn's defaults for networks, neurons, losses, optimisers and runs, in one place.

The values are snnTorch's (neurons, surrogates, losses) and PyTorch's (optimisers), so an
unconfigured network means the same thing in all three. The C++ spec
(host/include/popsnn/NetworkSpec.hpp) has the same defaults; tests/product/
test_defaults_schema.py compares them through the binding (`popsnn._native.defaults()`) and
checks that the Python classes take theirs from here. Keys are the Python spec's names.

snnTorch has no default decay for Leaky's beta or Synaptic's alpha (they are required there,
and in popsnn's layers); `beta` and `alpha` here are what the C++ spec and `popsnn train`
use when none is given.
"""

from __future__ import annotations

NEURON = {
    "bias": True,  # Linear(bias=True), as torch.nn.Linear
    "all_to_all": True,  # RLeaky: V is [N, N] with a bias
    "beta": 0.9,
    "alpha": 0.8,  # Synaptic
    "threshold": 1.0,
    "reset_mechanism": "subtract",
    "surrogate": "atan",  # snnTorch's default spike_grad: ATan(alpha=2.0)
    "surrogate_param": 2.0,
    "sparse": "none",
    "sparse_value": 0.0,
}

LOSS = {
    "name": "ce_count",
    "correct_rate": 1.0,  # mse_count
    "incorrect_rate": 0.0,
    "on_target": 1.0,  # mse_membrane
    "off_target": 0.0,
}

OPTIMIZER = {  # torch.optim.Adam's defaults
    "name": "adam",
    "lr": 1e-3,
    "momentum": 0.0,  # SGD
    "dampening": 0.0,
    "nesterov": False,
    "weight_decay": 0.0,
    "beta1": 0.9,
    "beta2": 0.999,
    "eps": 1e-8,
}

RUN = {
    "num_steps": 25,
    "batch_size": 128,
    "max_activity": 1.0,  # spike-buffer capacity: never overflows
    "trace_activity": 0.0,  # gradient trace over all steps: 0 = measured on the first batch
    "spike_activity": 0.0,  # spike ids, all steps: 0 = max_activity or measured
    "grad_list_activity": 0.0,  # dL/dI lists between compressed traces: 0 = measured
    "sparse_backward_max_live": 0.0,  # a rule's layer more live runs dense: 0 = measured here
}

SCHEMA = {"neuron": NEURON, "loss": LOSS, "optimizer": OPTIMIZER, "run": RUN}
