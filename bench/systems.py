"""The systems a benchmark compares, each as a factory of one training step.

Every factory takes the same workload (network, batch, labels, steps, input
mode) and returns a zero-argument callable that performs one full training
step on it: forward over all steps, loss, backward and optimiser update. The
step is what gets timed; set-up (graph compilation, tensor allocation) is not.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

import popsnn
from popsnn import losses, optim, reference


@dataclass
class Workload:
    """One benchmark configuration, shared by every system that runs it."""

    net: popsnn.Sequential
    x: np.ndarray  # [B, N] direct current, or [T, B, N] one tensor per step
    y: np.ndarray  # [B] integer labels
    num_steps: int
    loss: losses.Loss
    lr: float = 5e-4
    seed: int = 0

    @property
    def batch_size(self) -> int:
        return int(self.y.shape[0])

    @property
    def direct(self) -> bool:
        return self.x.ndim == 2  # x is flat per sample: [B, N] or [T, B, N]

    def fresh_params(self):
        return self.net.init_params(self.seed, dtype=np.float32)


Step = Callable[[], None]
# torch.compile's backend for the compiled snnTorch system: PyTorch's default (Inductor, C++
# kernels). The smoke test swaps in "aot_eager" (same graph capture and autograd, no C++
# build) to stay fast.
COMPILE_BACKEND = "inductor"


def numpy_reference(work: Workload, hoist: bool = True) -> Step:
    """The dense NumPy reference. With `hoist`, a direct input's W x and its weight gradient are
    computed once per minibatch; without, the input is fed as T identical tensors (what a
    framework that does not know the input is constant does)."""
    params = work.fresh_params()
    opt = optim.Adam(lr=work.lr)
    x = work.x
    if work.direct and not hoist:
        x = np.broadcast_to(x, (work.num_steps, *x.shape)).copy()

    def step():
        _, grads, _ = reference.loss_and_grad(
            work.net, params, x, work.y, work.loss, num_steps=work.num_steps
        )
        opt.step(params, grads)

    return step


def snntorch_available() -> str | None:
    """None if snnTorch can run here, else the reason it cannot."""
    for mod in ("torch", "snntorch"):
        if importlib.util.find_spec(mod) is None:
            return f"{mod} is not installed (pip install 'popsnn[crosscheck]')"
    return None


def numpy_step(work: Workload) -> Step:
    """The hand-written NumPy step (bench/numpy_step.py): layer by layer, the first layer's
    current and weight gradient hoisted, BLAS on the machine's threads, Adam."""
    import numpy_step as ns

    reason = ns.unsupported(work.net, work.loss, work.x)
    if reason:
        raise ValueError(reason)
    trainer = ns.NumpyStep(
        work.net, work.fresh_params(), work.num_steps, num_classes=work.loss.num_classes, lr=work.lr
    )
    x = np.ascontiguousarray(work.x, dtype=np.float32)

    def step():
        trainer.step(x, work.y)

    return step


def dense_products(work: Workload):
    """The limit: only the matrix products of the step, done densely at BLAS speed (no neuron
    update, no loss, no optimiser): per layer the current `in x W^T`, the weight gradient
    `dI^T in` and (beyond the first layer) the input gradient `dI W`; the first layer's over
    B rows when the input is direct current (hoisted), every layer's over T*B rows otherwise.
    A Conv2d stage counts as its im2col product ([rows x output positions, C_in kH kW] by
    [C_in kH kW, C_out]; the window copies and pooling are not counted).
    An all-to-all RLeaky layer adds its recurrent map's three products over T*B rows (the
    previous step's spikes by V, V's gradient and the gradient through V).
    Returns (step, flops per step)."""
    rng = np.random.default_rng(work.seed)
    T, B = work.num_steps, work.batch_size
    mats, flops = [], 0
    for l, stage in enumerate(work.net.stages):
        syn = stage.synapse
        rows = B if (l == 0 and work.direct) else T * B
        if isinstance(syn, popsnn.Conv2d):
            out_h, out_w = syn.output_shape(tuple(stage.in_shape))[1:]
            rows *= out_h * out_w
            n_in, n_out = (
                syn.in_channels * syn.kernel_size[0] * syn.kernel_size[1],
                syn.out_channels,
            )
        else:
            n_in, n_out = syn.in_features, syn.out_features
        a = rng.random((rows, n_in), dtype=np.float32)
        w = rng.random((n_out, n_in), dtype=np.float32)
        d = rng.random((rows, n_out), dtype=np.float32)
        mats.append((l, a, w, d))
        flops += 2 * rows * n_in * n_out * (2 if l == 0 else 3)
        if isinstance(stage.neuron, popsnn.RLeaky) and stage.neuron.all_to_all:
            n = stage.num_neurons
            s_prev = rng.random((T * B, n), dtype=np.float32)
            v = rng.random((n, n), dtype=np.float32)
            g = rng.random((T * B, n), dtype=np.float32)
            mats.append((1, s_prev, v, g))  # all three products, as a hidden layer's
            flops += 2 * T * B * n * n * 3

    def step():
        for l, a, w, d in mats:
            a @ w.T
            d.T @ a
            if l:
                d @ w

    return step, flops


def _torch_synapse(ops, nn):
    """A stage's stateless layers (Linear, Conv2d, pooling, Flatten) as torch modules, with
    torch's own initialisation."""
    modules = []
    for op in ops:
        if isinstance(op, popsnn.Linear):
            modules.append(nn.Linear(op.in_features, op.out_features, bias=op.bias))
        elif isinstance(op, popsnn.Conv2d):
            modules.append(
                nn.Conv2d(
                    op.in_channels, op.out_channels, op.kernel_size, op.stride, op.padding,
                    bias=op.bias,
                )
            )  # fmt: skip
        elif isinstance(op, popsnn.MaxPool2d):
            modules.append(nn.MaxPool2d(op.kernel_size, op.stride, op.padding))
        elif isinstance(op, popsnn.AvgPool2d):
            modules.append(nn.AvgPool2d(op.kernel_size, op.stride, op.padding))
        else:
            modules.append(nn.Flatten())
    return modules[0] if len(modules) == 1 else nn.Sequential(*modules)


def _snntorch_layers(net, snn, nn) -> tuple:
    """snnTorch's synapse modules (nn.Linear, or a stage's Conv2d / pooling / Flatten) and
    neuron modules for popsnn's layers, with the same surrogate as popsnn's layer, so both
    libraries do the same arithmetic."""
    from popsnn.interop import snntorch_surrogate

    linears, neurons = nn.ModuleList(), nn.ModuleList()
    for stage in net.stages:
        neuron = stage.neuron
        common = dict(
            threshold=neuron.threshold,
            reset_mechanism=neuron.reset_mechanism,
            spike_grad=snntorch_surrogate(neuron.surrogate),
        )
        linears.append(_torch_synapse(stage.ops, nn))
        if isinstance(neuron, popsnn.Leaky):
            neurons.append(snn.Leaky(beta=neuron.beta, **common))
        elif isinstance(neuron, popsnn.Synaptic):
            neurons.append(snn.Synaptic(alpha=neuron.alpha, beta=neuron.beta, **common))
        else:
            neurons.append(
                snn.RLeaky(
                    beta=neuron.beta,
                    all_to_all=neuron.all_to_all,
                    linear_features=stage.num_neurons,
                    **common,
                )
            )
    return linears, neurons


def snntorch(work: Workload, compiled: bool = False) -> Step:
    """The same network and step in snnTorch on the CPU (float32, PyTorch's own threads),
    written as snnTorch's tutorials do: explicit state, one Python loop over the steps.
    `compiled`: forward and loss through `torch.compile` (the fastest CPU path an snnTorch
    user has; the first steps compile, which the worker reports apart as warm-up time)."""
    import snntorch as snn
    import snntorch.functional as SF
    import torch
    from torch import nn

    torch.manual_seed(work.seed)
    linears, neurons = _snntorch_layers(work.net, snn, nn)
    params = list(linears.parameters()) + list(neurons.parameters())
    opt = torch.optim.Adam(params, lr=work.lr)
    if work.loss.name != "ce_count":
        raise ValueError(f"the snnTorch system implements ce_count only, got {work.loss.name}")
    loss_fn = SF.ce_count_loss(
        population_code=work.loss.population_code, num_classes=work.loss.num_classes or False
    )
    x = torch.from_numpy(np.ascontiguousarray(work.x, dtype=np.float32))
    x = x.reshape(*x.shape[:-1], *work.net.input_shape)  # [.., C, H, W] for a conv net
    y = torch.from_numpy(work.y.astype(np.int64))

    def one_step(h, states):
        """One time step through every layer: (output spikes, new states)."""
        new = []
        for fc, n, state in zip(linears, neurons, states):
            cur = fc(h)
            if isinstance(n, snn.Synaptic):
                h, syn, mem = n(cur, *state)
                new.append((syn, mem))
            elif isinstance(n, snn.RLeaky):
                h, mem = n(cur, *state)
                new.append((h, mem))
            else:
                h, mem = n(cur, *state)
                new.append((mem,))
        return h, new

    def forward():
        states = []
        for n in neurons:
            if isinstance(n, snn.Synaptic):
                states.append(n.init_synaptic())
            elif isinstance(n, snn.RLeaky):
                states.append(n.init_rleaky())
            else:
                states.append((n.init_leaky(),))
        out = []
        for t in range(work.num_steps):
            h, states = one_step(x if work.direct else x[t], states)
            out.append(h)
        return torch.stack(out)

    def forward_loss():
        return loss_fn(forward(), y)

    if compiled:
        # What a user does: the forward (the loop over steps, unrolled by the compiler) and the
        # loss through torch.compile. Compiling only the time step instead compiled faster
        # (~60 s against ~170 s here, on a loaded machine) but its steps ran slower than eager.
        forward_loss = torch.compile(forward_loss, backend=COMPILE_BACKEND)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = forward_loss()
        loss.backward()
        opt.step()
        return loss.detach()

    return step


def engine_available(device: str = "cpu") -> str | None:
    """None if popsnn's engine can run on `device` here, else the reason it cannot."""
    try:
        from popsnn import engine  # noqa: F401
    except ImportError as err:
        return f"popsnn's engine is not built in this installation ({err})"
    return None


def popsnn_model(work: Workload, device: str = "cpu", **device_options) -> popsnn.Model:
    """popsnn's model of a workload as the bench times it (Adam at the workload's rate)."""
    return popsnn.Model(
        work.net,
        loss=work.loss,
        optimizer=optim.Adam(lr=work.lr),
        device=device,
        num_steps=work.num_steps,
        batch_size=work.batch_size,
        seed=work.seed,
        **device_options,
    )


def popsnn_engine(work: Workload, device: str = "cpu", **device_options) -> Step:
    """popsnn's sparse engine on the Poplar-compatible CPU runtime (or an IPU geometry)."""
    model = popsnn_model(work, device, **device_options)

    def step():
        model.train_step(work.x, work.y)

    return step
