"""NIR interop: popsnn <-> nir.NIRGraph, exact round trips and snnTorch cross-checks."""

import numpy as np
import pytest

nir = pytest.importorskip("nir")

import popsnn  # noqa: E402
from popsnn import reference, sparse, surrogate  # noqa: E402
from popsnn.nir_interop import NIRError  # noqa: E402


def every_kind_net():
    return popsnn.Sequential(
        popsnn.Linear(5, 4),
        popsnn.Leaky(beta=0.9, surrogate=surrogate.fast_sigmoid(10), sparse=sparse.window(0.5)),
        popsnn.Linear(4, 4, bias=False),
        popsnn.RLeaky(beta=0.7, reset_mechanism="zero"),
        popsnn.Linear(4, 4),
        popsnn.RLeaky(beta=0.3, all_to_all=False),
        popsnn.Linear(4, 3),
        popsnn.Synaptic(alpha=0.37, beta=0.83, threshold=0.7),
    )


def spikes_in(seed, shape):
    return (np.random.default_rng(seed).random(shape) < 0.4).astype(np.float64)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_popsnn_to_nir_file_and_back_is_exact(tmp_path, dtype):
    net = every_kind_net()
    params = net.init_params(1, dtype=dtype)
    graph = popsnn.export_to_nir(net, params)
    graph.infer_types()  # a well-typed graph, as NIR tools expect
    assert isinstance(graph.nodes["1"], nir.LIF) and isinstance(graph.nodes["7"], nir.CubaLIF)
    assert isinstance(graph.nodes["3.w_rec"], nir.Affine)
    assert isinstance(graph.nodes["5.w_rec"], nir.Linear)  # one-to-one: a diagonal
    nir.write(tmp_path / "net.nir", graph)
    net2, params2 = popsnn.import_from_nir(nir.read(tmp_path / "net.nir"))
    assert repr(net2) == repr(net)
    for a, b in zip(params, params2):
        assert a.keys() == b.keys()
        for key in a:
            assert b[key].dtype == dtype
            np.testing.assert_array_equal(a[key], b[key])


def test_nir_parameters_follow_snntorch_conventions():
    net = popsnn.Sequential(popsnn.Linear(3, 2), popsnn.Synaptic(alpha=0.5, beta=0.75))
    node = popsnn.export_to_nir(net, net.init_params(0), dt=1e-3).nodes["1"]
    np.testing.assert_allclose(node.tau_mem, 1e-3 / 0.25)
    np.testing.assert_allclose(node.tau_syn, 1e-3 / 0.5)
    np.testing.assert_allclose(node.r, node.tau_mem / 1e-3)  # input scale r*dt/tau = 1
    np.testing.assert_allclose(node.w_in, node.tau_syn / 1e-3)
    np.testing.assert_array_equal(node.v_leak, 0.0)
    np.testing.assert_array_equal(node.v_threshold, [1.0, 1.0])


def test_a_graph_without_popsnn_metadata_reads_as_nir_says():
    net = popsnn.Sequential(popsnn.Linear(3, 2), popsnn.Leaky(beta=0.5))
    graph = popsnn.export_to_nir(net, net.init_params(0))
    graph.nodes["1"].metadata = {}
    net2, _ = popsnn.import_from_nir(graph)
    assert net2.pairs[0][1].reset_mechanism == "zero"  # NIR resets to v_reset
    assert net2.pairs[0][1].beta == pytest.approx(0.5, abs=1e-15)


def graph_with(node_name, **changes):
    net = popsnn.Sequential(popsnn.Linear(3, 2), popsnn.Leaky(beta=0.5))
    graph = popsnn.export_to_nir(net, net.init_params(0))
    for key, value in changes.items():
        setattr(graph.nodes[node_name], key, value)
    return graph


@pytest.mark.parametrize(
    "graph, message",
    [
        (lambda: graph_with("1", v_leak=np.array([0.1, 0.1])), "node '1': v_leak=0.1"),
        (lambda: graph_with("1", v_reset=np.array([0.2, 0.2])), "node '1': v_reset=0.2"),
        (lambda: graph_with("1", r=np.array([1.0, 1.0])), "node '1': r=1"),
        (lambda: graph_with("1", tau=np.array([2e-4, 3e-4])), "tau differs between neurons"),
        (lambda: graph_with("1", v_threshold=np.array([1.0, 2.0])), "v_threshold differs"),
    ],
)
def test_what_popsnn_cannot_express_is_one_error_naming_node_and_parameter(graph, message):
    with pytest.raises(NIRError, match=message):
        popsnn.import_from_nir(graph())


def test_unsupported_nodes_and_shapes_are_named():
    g = nir.NIRGraph(
        nodes={
            "input": nir.Input(input_type={"input": np.array([3])}),
            "conv": nir.Conv1d(
                input_shape=3,
                weight=np.ones((1, 1, 1)),
                stride=1,
                padding=0,
                dilation=1,
                groups=1,
                bias=np.zeros(1),
            ),
            "output": nir.Output(output_type={"output": np.array([3])}),
        },
        edges=[("input", "conv"), ("conv", "output")],
        type_check=False,
    )
    with pytest.raises(NIRError, match="node 'conv': Conv1d is not supported"):
        popsnn.import_from_nir(g)
    branching = graph_with("1")
    branching.edges.append(("0", "output"))
    with pytest.raises(NIRError, match="without branches"):
        popsnn.import_from_nir(branching)
    with pytest.raises(TypeError, match="nir.NIRGraph"):
        popsnn.import_from_nir("net.nir")
    with pytest.raises(ValueError, match="dt must be"):
        popsnn.import_from_nir(graph_with("1"), dt=0)
    with pytest.raises(ValueError, match="dtype must be"):
        popsnn.import_from_nir(graph_with("1"), dtype=np.int32)


def test_a_model_exports_its_current_weights():
    net = popsnn.Sequential(popsnn.Linear(3, 2), popsnn.Leaky(beta=0.5))
    model = popsnn.Model(net, device="reference", num_steps=4, batch_size=2, seed=3)
    graph = popsnn.export_to_nir(model)
    np.testing.assert_array_equal(graph.nodes["0"].weight, model.get_params()[0]["weight"])


# ----------------------------------------------------------------------- snnTorch cross-checks

torch = pytest.importorskip("torch")
snn = pytest.importorskip("snntorch")
pytest.importorskip("nirtorch")


def run_torch(model, x):
    """Output spikes [T, B, C] of an snnTorch Sequential with init_hidden layers."""
    for m in model.modules():
        if hasattr(m, "reset_mem"):
            m.reset_mem()
    dtype = next(model.parameters()).dtype
    out = []
    with torch.no_grad():
        for t in range(x.shape[0]):
            h = torch.as_tensor(x[t])
            for m in model.children():
                h = m(h.to(dtype))  # snnTorch emits float32 spikes whatever the model dtype
                h = h[0] if isinstance(h, tuple) else h
            out.append(h.numpy())
    return np.stack(out)


def test_snntorch_export_imports_into_popsnn_with_the_same_spikes():
    from snntorch.export_nir import export_to_nir

    torch.manual_seed(0)
    # Per-neuron tensors: snnTorch's exporter needs them to type the graph. Zero reset: the
    # reset NIR describes (v_reset = 0), as snnTorch's default reset_delay applies it.
    model = torch.nn.Sequential(
        torch.nn.Linear(6, 8),
        snn.Leaky(
            beta=torch.full((8,), 0.8),
            threshold=torch.ones(8),
            init_hidden=True,
            reset_mechanism="zero",
        ),
        torch.nn.Linear(8, 8),
        snn.RLeaky(beta=0.85, linear_features=8, init_hidden=True, reset_mechanism="zero"),
        torch.nn.Linear(8, 4),
        snn.Synaptic(
            alpha=torch.full((4,), 0.6),
            beta=torch.full((4,), 0.9),
            threshold=torch.full((4,), 0.5),
            init_hidden=True,
            output=True,
            reset_mechanism="zero",
        ),
    )
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.round(p * 64) / 32)  # livelier, and sums exact in float32
    graph = export_to_nir(model, torch.randn(6))
    net, params = popsnn.import_from_nir(graph)
    assert [type(n).__name__ for _, n in net.pairs] == ["Leaky", "RLeaky", "Synaptic"]
    x = spikes_in(0, (25, 3, 6)).astype(np.float32)
    ours = reference.forward(net, params, x).spikes[-1]
    theirs = run_torch(model, x)
    assert theirs.sum() > 10  # not two silent networks
    np.testing.assert_array_equal(ours, theirs)


def test_popsnn_export_imports_into_snntorch_with_the_same_parameters_and_spikes():
    from snntorch.import_nir import import_from_nir

    net = popsnn.Sequential(
        popsnn.Linear(6, 8),
        popsnn.Leaky(beta=0.8, reset_mechanism="zero"),
        popsnn.Linear(8, 4),
        popsnn.Synaptic(alpha=0.6, beta=0.9, threshold=0.5, reset_mechanism="zero"),
    )
    params = [{k: 2 * v for k, v in p.items()} for p in net.init_params(2)]
    model = import_from_nir(popsnn.export_to_nir(net, params))
    cells = [m for m in model.modules() if isinstance(m, (snn.Leaky, snn.Synaptic))]
    assert [type(c).__name__ for c in cells] == ["Leaky", "Synaptic"]
    np.testing.assert_allclose(cells[0].beta.numpy(), 0.8, rtol=1e-6)
    np.testing.assert_allclose(float(cells[1].alpha), 0.6, rtol=1e-6)
    np.testing.assert_allclose(float(cells[1].threshold), 0.5, rtol=1e-6)
    np.testing.assert_array_equal(getattr(model, "0").weight.detach().numpy(), params[0]["weight"])
    # snnTorch's importer builds immediate-reset layers; popsnn's (and snnTorch's default)
    # reset lands one step later: give the imported layers that to compare step by step.
    for cell in cells:
        cell.reset_delay = True
    x = spikes_in(1, (25, 3, 6)).astype(np.float32)
    ours = reference.forward(net, params, x).spikes[-1]
    for cell in cells:
        cell.reset_mem()
    theirs = []
    with torch.no_grad():
        state = None
        for t in range(x.shape[0]):
            out, state = model(torch.from_numpy(x[t]), state)
            theirs.append(out.numpy())
    theirs = np.stack(theirs)
    assert theirs.sum() > 10
    np.testing.assert_array_equal(ours, theirs)


def test_snntorch_to_nir_to_popsnn_and_back_to_snntorch_keeps_the_spikes():
    """The whole trip of an snnTorch user: their model (per-neuron tensors, as snnTorch's
    exporter needs) -> NIR -> popsnn (also converted directly) -> NIR -> snnTorch again."""
    from snntorch.export_nir import export_to_nir
    from snntorch.import_nir import import_from_nir

    from popsnn import interop

    torch.manual_seed(1)
    original = torch.nn.Sequential(
        torch.nn.Linear(6, 10),
        snn.Leaky(
            beta=torch.full((10,), 0.875),
            threshold=torch.ones(10),
            init_hidden=True,
            reset_mechanism="zero",
        ),
        torch.nn.Linear(10, 3),
        snn.Leaky(
            beta=torch.full((3,), 0.75),
            threshold=torch.full((3,), 0.5),
            init_hidden=True,
            output=True,
            reset_mechanism="zero",
        ),
    )
    with torch.no_grad():
        for p in original.parameters():
            p.copy_(torch.round(p * 64) / 32)  # livelier, and sums exact in float32
    net, params = popsnn.import_from_nir(export_to_nir(original, torch.randn(6)))
    direct_net, direct_params = interop.from_snntorch(original)  # equal per-neuron values
    assert [n.threshold for _, n in direct_net.pairs] == [n.threshold for _, n in net.pairs]
    for got, expect in zip(direct_params, params):
        for key in expect:
            np.testing.assert_array_equal(got[key], expect[key])
    back = import_from_nir(popsnn.export_to_nir(net, params))
    cells = [m for m in back.modules() if isinstance(m, snn.Leaky)]
    for cell in cells:  # snnTorch's importer builds immediate-reset layers (see above)
        cell.reset_delay = True
        cell.reset_mem()
    x = spikes_in(3, (30, 4, 6)).astype(np.float32)
    theirs = run_torch(original, x)
    returned, state = [], None
    with torch.no_grad():
        for t in range(x.shape[0]):
            out, state = back(torch.from_numpy(x[t]), state)
            returned.append(out.numpy())
    assert theirs.sum() > 20  # not silent networks
    np.testing.assert_array_equal(reference.forward(net, params, x).spikes[-1], theirs)
    np.testing.assert_array_equal(np.stack(returned), theirs)
