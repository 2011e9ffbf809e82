"""One schema of defaults (popsnn.defaults): the Python classes take theirs from it, and the
C++ spec (NetworkSpec.hpp, read through the binding) has the same values."""

import inspect

import pytest

import popsnn
from popsnn import defaults, losses, optim, surrogate
from popsnn.model import Model


def test_cpp_spec_defaults_equal_the_python_schema():
    native = pytest.importorskip("popsnn._native")
    cpp = native.defaults()
    assert set(cpp) == set(defaults.SCHEMA)
    for group, values in defaults.SCHEMA.items():
        assert set(cpp[group]) == set(values), group
        for key, want in values.items():
            if isinstance(want, float):  # C++ keeps some in float32
                assert cpp[group][key] == pytest.approx(want, rel=1e-7), (group, key)
            else:
                assert cpp[group][key] == want, (group, key)


def test_python_classes_take_their_defaults_from_the_schema():
    n = defaults.NEURON
    leaky = popsnn.Leaky(beta=n["beta"])
    assert (leaky.threshold, leaky.reset_mechanism) == (n["threshold"], n["reset_mechanism"])
    assert leaky.surrogate == surrogate.get(n["surrogate"])
    assert leaky.surrogate.param == n["surrogate_param"] and leaky.sparse is None
    assert popsnn.Linear(2, 3).bias is n["bias"]
    assert popsnn.RLeaky(beta=0.5).all_to_all is n["all_to_all"]
    from popsnn.train import Config

    config = Config()
    assert (config.beta, config.alpha, config.threshold) == (n["beta"], n["alpha"], n["threshold"])

    loss = losses.get(defaults.LOSS["name"])
    mse = inspect.signature(losses.mse_count_loss).parameters
    assert mse["correct_rate"].default == defaults.LOSS["correct_rate"]
    assert mse["incorrect_rate"].default == defaults.LOSS["incorrect_rate"]
    membrane = inspect.signature(losses.mse_membrane_loss).parameters
    assert membrane["on_target"].default == defaults.LOSS["on_target"]
    assert membrane["off_target"].default == defaults.LOSS["off_target"]

    o = defaults.OPTIMIZER
    adam = optim.get(o["name"]).hyper
    assert adam["lr"] == o["lr"] and adam["betas"] == (o["beta1"], o["beta2"])
    assert adam["eps"] == o["eps"] and adam["weight_decay"] == o["weight_decay"]
    sgd = optim.SGD(lr=o["lr"]).hyper
    assert (sgd["momentum"], sgd["dampening"], sgd["nesterov"]) == (
        o["momentum"],
        o["dampening"],
        o["nesterov"],
    )

    net = popsnn.Sequential(popsnn.Linear(3, 2), popsnn.Leaky(beta=0.5))
    model = Model(net, device="reference")
    assert (model.num_steps, model.batch_size) == (
        defaults.RUN["num_steps"],
        defaults.RUN["batch_size"],
    )
    assert model.loss.name == loss.name and model.optimizer.name == o["name"]
    assert model.learning_rate == o["lr"]
