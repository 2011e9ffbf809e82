"""NIR interop: a popsnn network to a `nir.NIRGraph` and back, with snnTorch's conventions.

    graph = popsnn.export_to_nir(net, params)          # or export_to_nir(model)
    nir.write("net.nir", graph)
    net, params = popsnn.import_from_nir(nir.read("net.nir"))

The graph is the one snnTorch's `export_to_nir` writes for the same `nn.Sequential`: nodes
"input", "0", "1", ..., "output" in a chain; `nn.Linear` is `nir.Affine` (`nir.Linear` without
bias); Leaky is `nir.LIF`, Synaptic `nir.CubaLIF`; an RLeaky is a `nir.LIF` "<i>.lif" in a cycle
with its recurrent weights "<i>.w_rec" (`nir.Affine`, or a diagonal `nir.Linear` for a one-to-one
RLeaky). Time constants are snnTorch's, with its step `dt` (1e-4 s by default):

    beta = 1 - dt/tau (tau_mem),   alpha = 1 - dt/tau_syn,   r = tau/dt,   w_in = tau_syn/dt,

so the discretised NIR equations are exactly popsnn's `U = beta*U + I`, `J = alpha*J + I`;
v_leak and v_reset are 0. What NIR cannot say -- the reset mechanism ("subtract" or "zero";
NIR's reset to v_reset is "zero"), the surrogate, a sparse rule and the exact float of beta /
alpha -- popsnn keeps in each neuron node's metadata ("popsnn_*" keys), so popsnn -> NIR ->
popsnn is exact. A graph without them (e.g. from snnTorch) is read as NIR says: reset to zero,
applied one step later as snnTorch's default `reset_delay=True` (snnTorch's own importer builds
`reset_delay=False` layers instead), with popsnn's default surrogate.

Anything popsnn cannot express exactly -- other node types, per-neuron time constants or
thresholds, v_leak or v_reset != 0, an input scale r*dt/tau (or w_in*dt/tau_syn) != 1, a graph
that is not a chain -- raises `NIRError` naming the node and the parameter.
`nir` is imported only when these functions are called (`pip install 'popsnn[nir]'`).
"""

from __future__ import annotations

import numbers

import numpy as np

from . import layers as _layers
from . import nir_conv as _nir_conv
from . import sparse as _sparse
from . import surrogate as _surrogate
from .reference import check_params

__all__ = ["NIRError", "export_to_nir", "import_from_nir", "DEFAULT_DT"]

DEFAULT_DT = 1e-4  # snnTorch's export_to_nir / import_from_nir step
_SCALE_RTOL = 1e-5  # float32 time constants reproduce r*dt/tau = 1 to ~1e-7


class NIRError(ValueError):
    """A graph or network that cannot be converted exactly; the message names node and fix."""


def _import_nir():
    try:
        import nir
    except ImportError:
        raise ImportError("NIR interop needs the nir package: pip install 'popsnn[nir]'") from None
    return nir


def _check_dt(dt) -> float:
    if isinstance(dt, bool) or not isinstance(dt, numbers.Real) or not np.isfinite(dt) or dt <= 0:
        raise ValueError(
            f"dt must be a finite time step > 0 in seconds (snnTorch uses 1e-4), got {dt!r}"
        )
    return float(dt)


# --------------------------------------------------------------------------- export


def _tau(decay: float, dt: float, n: int) -> np.ndarray:
    with np.errstate(divide="ignore"):  # decay 1 (no leak) is tau = inf
        return np.full(n, dt / (1.0 - decay), np.float64)


def _neuron_metadata(neuron) -> dict:
    meta = {
        "popsnn_reset_mechanism": neuron.reset_mechanism,
        "popsnn_surrogate": neuron.surrogate.name,
        "popsnn_surrogate_param": float(neuron.surrogate.param),
        "popsnn_beta": float(neuron.beta),
    }
    if isinstance(neuron, _layers.Synaptic):
        meta["popsnn_alpha"] = float(neuron.alpha)
    if neuron.sparse is not None:
        meta["popsnn_sparse"] = neuron.sparse.kind
        meta["popsnn_sparse_value"] = float(neuron.sparse.value)
    return meta


# Why a model has no NIR node (NIR 1.0: LI, LIF, CubaLI, CubaLIF, IF, I, Threshold, Scale,
# Affine, Linear, Delay). Alpha's membrane is tau_alpha times the sum of two currents of opposite
# sign, and its zero / subtract reset acts on both currents: CubaLIF has one current that its
# reset leaves alone, and a graph of LI, Scale and Threshold nodes can sum the currents but has
# no node that resets them when the neuron spikes.
_NO_NIR_NODE = {
    "Alpha": (
        "NIR has no node for it: its membrane is tau_alpha (E + H) of two opposite currents "
        "that its reset acts on, while CubaLIF has one current its reset leaves alone and NIR's "
        "LI / Scale / Threshold nodes have no reset of a current"
    ),
}


def _neuron_node(nir, neuron, n: int, dt: float):
    # The models NIR's nodes describe: any other (Lapicque, Alpha, a new one) is refused,
    # never exported as a LIF.
    if not isinstance(neuron, (_layers.Leaky, _layers.Synaptic, _layers.RLeaky)):
        name = type(neuron).__name__
        why = _NO_NIR_NODE.get(name, "popsnn has no NIR export for it yet")
        raise NIRError(
            f"export_to_nir: a {name} layer has no NIR export ({why}); export a net of Leaky, "
            f"Synaptic or RLeaky layers"
        )
    unsupported = [f"learn_{name}" for name in neuron.learned()]
    unsupported += [f"per-neuron {name}" for name in neuron.per_neuron_constants()]
    if unsupported:
        raise NIRError(
            f"export_to_nir: {' and '.join(unsupported)} has no NIR export in popsnn yet "
            f"(NIR would drop the training flag and popsnn's exact constants); export layers "
            f"with one fixed beta and threshold"
        )
    tau_mem = _tau(neuron.beta, dt, n)
    common = dict(
        r=tau_mem / dt,
        v_leak=np.zeros(n),
        v_threshold=np.full(n, neuron.threshold),
        v_reset=np.zeros(n),
        metadata=_neuron_metadata(neuron),
    )
    if isinstance(neuron, _layers.Synaptic):
        tau_syn = _tau(neuron.alpha, dt, n)
        return nir.CubaLIF(tau_syn=tau_syn, tau_mem=tau_mem, w_in=tau_syn / dt, **common)
    return nir.LIF(tau=tau_mem, **common)


def _dense_node(nir, weight, bias):
    return nir.Linear(weight=weight) if bias is None else nir.Affine(weight=weight, bias=bias)


def export_to_nir(net, params=None, dt: float = DEFAULT_DT):
    """A `nir.NIRGraph` of `net` with `params` (or of a `popsnn.Model`, its current weights),
    laid out as snnTorch's `export_to_nir` lays out the same network."""
    nir = _import_nir()
    from .model import Model

    if isinstance(net, Model):
        net, params = net.net, (net.get_params() if params is None else params)
    if params is None:
        raise TypeError(
            "export_to_nir needs the weights: export_to_nir(net, params) or export_to_nir(model)"
        )
    check_params(net, params)
    dt = _check_dt(dt)
    nodes = {"input": nir.Input(input_type={"input": np.array(net.input_shape)})}
    edges, previous, index = [], "input", 0
    for stage, p in zip(net.stages, params):
        shape = stage.in_shape
        for op in stage.ops:
            name = str(index)
            if isinstance(op, _layers.Linear):
                nodes[name] = _dense_node(nir, p["weight"], p.get("bias"))
            else:
                try:
                    nodes[name] = _nir_conv.node_of(nir, op, p, shape)
                except _nir_conv.NIRConvError as err:
                    raise NIRError(f"export_to_nir: layer {index}: {err}") from None
            edges.append((previous, name))
            previous, index = name, index + 1
            shape = (op.out_features,) if isinstance(op, _layers.Linear) else op.output_shape(shape)
        neuron, n, cell = stage.neuron, stage.out_shape, str(index)
        index += 1
        if isinstance(neuron, _layers.RLeaky):
            lif, rec = f"{cell}.lif", f"{cell}.w_rec"
            nodes[lif] = _neuron_node(nir, neuron, n, dt)
            nodes[lif].metadata["popsnn_all_to_all"] = neuron.all_to_all
            if neuron.all_to_all:
                nodes[rec] = _dense_node(nir, p["recurrent_weight"], p["recurrent_bias"])
            else:
                nodes[rec] = _dense_node(nir, np.diag(p["recurrent_weight"]), None)
            edges += [(previous, lif), (lif, rec), (rec, lif)]
            previous = lif
        else:
            nodes[cell] = _neuron_node(nir, neuron, n, dt)
            edges.append((previous, cell))
            previous = cell
    nodes["output"] = nir.Output(output_type={"output": np.array([net.num_outputs])})
    edges.append((previous, "output"))
    return nir.NIRGraph(nodes=nodes, edges=edges)


# --------------------------------------------------------------------------- import


def _uniform(node_name: str, node, field: str) -> float:
    """The one value of a per-neuron parameter; popsnn takes one per layer."""
    values = np.asarray(getattr(node, field), dtype=np.float64).ravel()
    if values.size == 0 or not np.all(values == values[0]):
        raise NIRError(
            f"node {node_name!r}: {field} differs between neurons ({values.size} "
            f"values); popsnn takes one {field} per layer"
        )
    return float(values[0])


def _decay(node_name: str, node, field: str, dt: float, meta_key: str) -> float:
    """1 - dt/tau, or the exact float popsnn wrote when it gives this tau (to float32)."""
    tau = _uniform(node_name, node, field)
    if not tau > 0:
        raise NIRError(f"node {node_name!r}: {field}={tau} must be > 0")
    decay = 1.0 - dt / tau
    exact = node.metadata.get(meta_key) if isinstance(node.metadata, dict) else None
    if exact is not None and np.isclose(_tau(float(exact), dt, 1)[0], tau, rtol=1e-6):
        decay = float(exact)
    if not 0.0 <= decay <= 1.0:
        raise NIRError(
            f"node {node_name!r}: {field}={tau} is shorter than dt={dt}, so the decay "
            f"1 - dt/{field} = {decay} is outside [0, 1]; pass the graph's dt to "
            f"import_from_nir(graph, dt=...)"
        )
    return decay


def _require(node_name: str, node, field: str, expected: float, fix: str):
    value = _uniform(node_name, node, field)
    if not np.isclose(value, expected, rtol=_SCALE_RTOL, atol=0.0 if expected else 1e-12):
        raise NIRError(
            f"node {node_name!r}: {field}={value} is not supported (popsnn needs "
            f"{expected:g}); {fix}"
        )


def _neuron_from_node(nir, name: str, node, dt: float, recurrent=None):
    meta = node.metadata if isinstance(node.metadata, dict) else {}
    if not isinstance(node, (nir.LIF, nir.CubaLIF)):
        raise NIRError(
            f"node {name!r}: {type(node).__name__} is not supported after a dense "
            f"layer; popsnn neurons are nir.LIF and nir.CubaLIF"
        )
    tau_field = "tau" if isinstance(node, nir.LIF) else "tau_mem"
    _require(name, node, "v_leak", 0.0, "popsnn neurons leak towards 0")
    _require(name, node, "v_reset", 0.0, "popsnn resets to 0 or subtracts the threshold")
    beta = _decay(name, node, tau_field, dt, "popsnn_beta")
    tau_mem = _uniform(name, node, tau_field)
    if np.isfinite(tau_mem):
        _require(
            name,
            node,
            "r",
            tau_mem / dt,
            f"set r = {tau_field}/dt (the input scale "
            f"r*dt/{tau_field} must be 1; fold any other scale into the weights)",
        )
    surrogate = _surrogate.get(meta.get("popsnn_surrogate", "atan"))
    if "popsnn_surrogate_param" in meta and surrogate.name != "straight_through":
        surrogate = getattr(_surrogate, surrogate.name)(float(meta["popsnn_surrogate_param"]))
    sparse = meta.get("popsnn_sparse")
    common = dict(
        threshold=_uniform(name, node, "v_threshold"),
        reset_mechanism=meta.get("popsnn_reset_mechanism", "zero"),
        surrogate=surrogate,
        sparse=None
        if sparse is None
        else getattr(_sparse, sparse)(float(meta["popsnn_sparse_value"])),
    )
    try:
        if isinstance(node, nir.CubaLIF):
            if recurrent is not None:
                raise NIRError(
                    f"node {name!r}: a recurrent CubaLIF (snnTorch's RSynaptic) is "
                    f"not supported by popsnn; use a recurrent LIF (RLeaky)"
                )
            alpha = _decay(name, node, "tau_syn", dt, "popsnn_alpha")
            tau_syn = _uniform(name, node, "tau_syn")
            if np.isfinite(tau_syn):
                _require(name, node, "w_in", tau_syn / dt, "set w_in = tau_syn/dt")
            return _layers.Synaptic(alpha=alpha, beta=beta, **common)
        if recurrent is not None:
            return _layers.RLeaky(beta=beta, all_to_all=recurrent, **common)
        return _layers.Leaky(beta=beta, **common)
    except (ValueError, TypeError) as err:
        if isinstance(err, NIRError):
            raise
        raise NIRError(f"node {name!r}: {err}") from None


def _dense_from_node(nir, name: str, node, n_in: int):
    if not isinstance(node, (nir.Affine, nir.Linear)):
        raise NIRError(
            f"node {name!r}: {type(node).__name__} is not supported here; popsnn "
            f"networks alternate nir.Affine/nir.Linear and nir.LIF/nir.CubaLIF"
        )
    weight = np.asarray(node.weight)
    if weight.ndim != 2 or weight.shape[1] != n_in:
        raise NIRError(
            f"node {name!r}: weight has shape {weight.shape}, expected "
            f"[out, {n_in}] after {n_in} inputs"
        )
    bias = np.asarray(node.bias) if isinstance(node, nir.Affine) else None
    if bias is not None and bias.shape != (weight.shape[0],):
        raise NIRError(f"node {name!r}: bias has shape {bias.shape}, expected ({weight.shape[0]},)")
    return weight, bias


def _chain(graph) -> list:
    """Node names from Input to Output, recurrent edges (a <-> b) set aside: {lif: w_rec}."""
    nodes, edges = graph.nodes, [tuple(e) for e in graph.edges]
    unknown = sorted({x for e in edges for x in e} - set(nodes))
    if unknown:
        raise NIRError(f"the graph's edges name node(s) {unknown} that are not in its nodes")
    cycles = {a: b for a, b in edges if (b, a) in edges and a != b}
    recurrent = {
        a: b for a, b in cycles.items() if sum(1 for e in edges if b in e) == 2
    }  # w_rec touches only its neuron
    skip = {(a, b) for a, b in edges if a in recurrent.values() or b in recurrent.values()}
    succ = {}
    for a, b in edges:
        if (a, b) not in skip:
            succ.setdefault(a, []).append(b)
    inputs = [k for k, v in nodes.items() if isinstance(v, _import_nir().Input)]
    if len(inputs) != 1:
        raise NIRError(f"the graph has {len(inputs)} nir.Input nodes; popsnn needs exactly one")
    order, name = [], inputs[0]
    while True:
        order.append(name)
        nxt = succ.get(name, [])
        if not nxt:
            break
        if len(nxt) != 1 or nxt[0] in order:
            raise NIRError(
                f"node {name!r} feeds {nxt}: popsnn reads a chain of layers "
                f"(Input, dense, neuron, ..., Output) without branches"
            )
        name = nxt[0]
    left = sorted(set(nodes) - set(order) - set(recurrent.values()))
    if left:
        raise NIRError(f"node(s) {left} are not on the chain from the Input to the Output")
    return order, recurrent


def _expand_subgraphs(nir, graph):
    """snnTorch's importer also takes an RLeaky as a sub-NIRGraph (input, lif, w_rec, output);
    flatten such nodes into the "<i>.lif" <-> "<i>.w_rec" form."""
    nodes, edges = dict(graph.nodes), [tuple(e) for e in graph.edges]
    for key, sub in list(nodes.items()):
        if not isinstance(sub, nir.NIRGraph):
            continue
        cells = {k: v for k, v in sub.nodes.items() if not isinstance(v, (nir.Input, nir.Output))}
        lifs = [k for k, v in cells.items() if isinstance(v, (nir.LIF, nir.CubaLIF))]
        dense = [k for k, v in cells.items() if isinstance(v, (nir.Affine, nir.Linear))]
        if len(cells) != 2 or len(lifs) != 1 or len(dense) != 1:
            raise NIRError(
                f"node {key!r}: a sub-graph other than a recurrent neuron (one "
                f"LIF/CubaLIF and its recurrent Affine/Linear) is not supported"
            )
        lif, rec = f"{key}.lif", f"{key}.w_rec"
        del nodes[key]
        nodes[lif], nodes[rec] = cells[lifs[0]], cells[dense[0]]
        edges = [(lif if a == key else a, lif if b == key else b) for a, b in edges]
        edges += [(lif, rec), (rec, lif)]
    return nodes, edges


def _output_check(nir, graph, order):
    last = graph.nodes[order[-1]]
    if not isinstance(last, nir.Output):
        raise NIRError(
            f"the chain ends at node {order[-1]!r} ({type(last).__name__}), not at a nir.Output"
        )


def import_from_nir(graph, dt: float = DEFAULT_DT, dtype=None) -> tuple:
    """(popsnn.Sequential, params) from a `nir.NIRGraph` (see the module docstring). `dtype`
    of the params: float32 or float64; default the weights' own (float32 if neither)."""
    nir = _import_nir()
    if not isinstance(graph, nir.NIRGraph):
        raise TypeError(
            f"import_from_nir takes a nir.NIRGraph (e.g. nir.read(path)), got "
            f"{type(graph).__name__}"
        )
    dt = _check_dt(dt)
    if dtype is not None and dtype not in (np.float32, np.float64):
        raise ValueError(f"dtype must be numpy.float32 or numpy.float64, got {dtype!r}")
    nodes, edges = _expand_subgraphs(nir, graph)
    flat = nir.NIRGraph.__new__(nir.NIRGraph)
    flat.nodes, flat.edges = nodes, edges  # no type inference: only the chain is read
    order, recurrent = _chain(flat)
    _output_check(nir, flat, order)
    body = order[1:-1]
    input_shape = tuple(int(n) for n in np.ravel(list(nodes[order[0]].input_type.values())[0]))
    if body and isinstance(nodes[body[0]], nir.Flatten):
        body = body[1:]  # popsnn takes its input flat already, as from_snntorch
        input_shape = (int(np.prod(input_shape)),)
    layers, params = _layers_from_chain(nir, nodes, body, recurrent, dt)
    target = dtype or (
        np.float64 if all(a.dtype == np.float64 for p in params for a in p.values()) else np.float32
    )
    params = [{k: np.array(v, dtype=target) for k, v in p.items()} for p in params]
    try:
        net = _layers.Sequential(*layers, input_shape=input_shape)
    except (ValueError, TypeError) as err:
        raise NIRError(f"the graph's layers do not make a popsnn network: {err}") from None
    check_params(net, params)
    return net, params


_READS = (
    "nir.Affine, nir.Linear, nir.Conv2d, nir.AvgPool2d, nir.SumPool2d, nir.Flatten, "
    "nir.LIF, nir.CubaLIF"
)


def _layers_from_chain(nir, nodes, body, recurrent, dt):
    """(layers, params) of the chain's nodes: one params dict per weighted node, a SumPool2d's
    factor folded into its stage's weights (and bias, when the pool follows them)."""
    layers, params = [], []
    scale_pending = 1.0  # a SumPool2d before the stage's weighted layer
    for name in body:
        node = nodes[name]
        if isinstance(node, (nir.LIF, nir.CubaLIF)):
            layers.append(_neuron_layer(nir, name, node, nodes, recurrent, params, dt))
            continue
        if isinstance(node, (nir.Affine, nir.Linear)):
            n_in = node.weight.shape[1] if np.ndim(node.weight) == 2 else -1
            weight, bias = _dense_from_node(nir, name, node, n_in)
            layer = _layers.Linear(weight.shape[1], weight.shape[0], bias=bias is not None)
            found = (
                layer,
                {"weight": weight} if bias is None else {"weight": weight, "bias": bias},
                1.0,
            )
        else:
            try:
                found = _nir_conv.layer_of(nir, node)
            except (_nir_conv.NIRConvError, ValueError, TypeError) as err:
                raise NIRError(f"node {name!r}: {err}") from None
        if found is None:
            raise NIRError(
                f"node {name!r}: {type(node).__name__} is not supported by popsnn; it reads "
                f"{_READS}"
            )
        layer, p, scale = found
        layers.append(layer)
        if p is not None:
            p = dict(p)
            p["weight"] = p["weight"] * scale_pending
            params.append(p)
            scale_pending = 1.0
        elif scale != 1.0 and layers and _stage_has_weights(layers):
            params[-1] = {k: v * scale for k, v in params[-1].items()}
        else:
            scale_pending *= scale
    return layers, params


def _stage_has_weights(layers) -> bool:
    """Whether the stage being read (since the last neuron) has its weighted layer yet."""
    for layer in reversed(layers):
        if isinstance(layer, _layers.NEURON_TYPES):
            return False
        if isinstance(layer, (_layers.Linear, _layers.Conv2d)):
            return True
    return False


def _neuron_layer(nir, name, node, nodes, recurrent, params, dt):
    """The popsnn neuron of a LIF / CubaLIF node (an RLeaky when it has a recurrent edge)."""
    if not params:
        raise NIRError(f"node {name!r}: a neuron needs a dense or convolution node before it")
    n = params[-1]["weight"].shape[0]
    rec_name = recurrent.get(name)
    all_to_all = None
    if rec_name is not None:
        rw, rb = _dense_from_node(nir, rec_name, nodes[rec_name], n)
        meta = node.metadata if isinstance(node.metadata, dict) else {}
        # snnTorch's rule: a diagonal recurrence without bias is one-to-one.
        diagonal = rb is None and np.array_equal(rw, np.diag(np.diag(rw)))
        all_to_all = bool(meta.get("popsnn_all_to_all", not diagonal))
        p = params[-1]
        if all_to_all:
            p["recurrent_weight"] = rw
            p["recurrent_bias"] = np.zeros(n, rw.dtype) if rb is None else rb
        elif not diagonal:
            raise NIRError(
                f"node {rec_name!r}: a one-to-one RLeaky needs a diagonal recurrent nir.Linear"
            )
        else:
            p["recurrent_weight"] = np.diag(rw).copy()
    thresholds = np.asarray(node.v_threshold).size
    if params[-1]["weight"].ndim == 2 and thresholds not in (1, n):
        raise NIRError(f"node {name!r}: {thresholds} thresholds after a dense layer of {n} outputs")
    return _neuron_from_node(nir, name, node, dt, all_to_all)
