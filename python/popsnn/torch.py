"""A popsnn network as a PyTorch module: tensors in and out, gradients to its parameters (torch
Parameters, so any torch optimiser and scheduler drives them) and to the layers upstream.

    snn = popsnn.torch.SpikingNetwork(net, num_steps=25)        # device="reference"
    model = torch.nn.Sequential(torch.nn.Linear(100, 784), snn)  # upstream PyTorch layers
    spikes, membranes = model(x)            # output layer's [T, B, C] each, as snnTorch records
    loss = my_torch_loss(spikes, membranes, y); loss.backward(); torch_optimizer.step()

    snn = popsnn.torch.SpikingNetwork(net, num_steps=25, device="cpu", loss="ce_count")
    loss = snn.loss(x, y)                   # a popsnn loss, computed on the device
    loss.backward()                         # gradients to snn's parameters

Device "reference" (the dense NumPy reference, the oracle) differentiates any PyTorch loss of
the spikes and membranes, and the input. The engine devices ("cpu", "ipu-model", "ipu") train
with a popsnn loss: `loss(x, y)` runs forward and BPTT on the device and hands the parameter
gradients to PyTorch, and the input's when x requires grad: dL/dx = (sum_t dL/dI[t]) W for
direct current x [B, N], dL/dx[t] = dL/dI[t] W for x [T, B, N] (dL/dI from the device, the
product on the host; per-step input gets an engine that keeps dL/dI of every step, built
the first time); `forward(x)` there is inference (no grad).
The weights go to the device before every call, so torch's updates are always the ones used.
"""

from __future__ import annotations

import numpy as np

try:
    import torch
except ImportError:
    raise ImportError("popsnn.torch needs PyTorch: pip install 'popsnn[torch]'") from None

from . import losses as _losses
from . import reference as _reference
from ._checks import positive_int
from .layers import Sequential
from .model import ENGINE_DEVICES, Model, resolve_device

__all__ = ["SpikingNetwork"]


def _numpy(t: torch.Tensor, dtype) -> np.ndarray:
    return t.detach().cpu().numpy().astype(dtype, copy=False)


class _Forward(torch.autograd.Function):
    """Output spikes and membranes of the reference; backward is its hand-written BPTT."""

    @staticmethod
    def forward(ctx, module, x, *weights):
        params = module.numpy_params()
        rec = _reference.forward(
            module.net, params, _numpy(x, module.np_dtype), module.steps_for(x)
        )
        ctx.module, ctx.params, ctx.rec = module, params, rec
        as_tensor = lambda a: torch.from_numpy(a).to(x.device)  # noqa: E731
        return as_tensor(rec.spikes[-1]), as_tensor(rec.membranes[-1])

    @staticmethod
    def backward(ctx, d_spikes, d_membranes):
        m = ctx.module
        grads, d_x = _reference.backward(
            m.net,
            ctx.params,
            ctx.rec,
            _numpy(d_spikes, m.np_dtype),
            _numpy(d_membranes, m.np_dtype),
            input_grad=True,
        )
        return (
            None,
            torch.from_numpy(d_x).to(d_spikes.device),
            *m.tensors_like(grads, d_spikes.device),
        )


class _Loss(torch.autograd.Function):
    """A popsnn loss with its gradients from the device (and the input's on the reference)."""

    @staticmethod
    def forward(ctx, module, x, y, *weights):
        value, grads, d_x = module.loss_and_grads(x, y)
        ctx.module, ctx.grads, ctx.d_x, ctx.device = module, grads, d_x, x.device
        return torch.tensor(value, dtype=module.dtype, device=x.device)

    @staticmethod
    def backward(ctx, d_loss):
        scale = d_loss.to(ctx.module.dtype)
        d_x = None if ctx.d_x is None else torch.from_numpy(ctx.d_x).to(ctx.device) * scale
        return (
            None,
            d_x,
            None,
            *(g * scale for g in ctx.module.tensors_like(ctx.grads, ctx.device)),
        )


class SpikingNetwork(torch.nn.Module):
    """A popsnn `Sequential` with its weights as torch Parameters; see the module docstring.

    `params`: popsnn's layout (default `net.init_params(seed)`), copied; they are named
    `layers.<l>.weight`, `.bias`, `.recurrent_weight`, `.recurrent_bias` (and `.beta`,
    `.threshold` for a layer that learns them) in `state_dict()`.
    `num_steps`: steps for direct-current input `[B, N]`; `[T, B, N]` input sets its own.
    `dtype`: torch.float32 (default) or torch.float64 (engine devices: float32 only); it
    follows the parameters afterwards, so `.double()` computes in float64 as torch would.
    `loss`, `batch_size` and `device_options` are for `loss()` and the engine devices.
    """

    def __init__(
        self,
        net: Sequential,
        params=None,
        *,
        num_steps: int | None = None,
        device: str = "reference",
        loss=None,
        batch_size: int | None = None,
        seed: int = 0,
        dtype=torch.float32,
        **device_options,
    ):
        super().__init__()
        if not isinstance(net, Sequential):
            raise TypeError(f"net must be a popsnn.Sequential, got {type(net).__name__}")
        if dtype not in (torch.float32, torch.float64):
            raise TypeError(f"dtype must be torch.float32 or torch.float64, got {dtype}")
        if num_steps is not None:
            num_steps = positive_int("num_steps", num_steps)
        if batch_size is not None:
            batch_size = positive_int("batch_size", batch_size)
        self.net, self.num_steps = net, num_steps
        self.device_name = resolve_device(device)
        self._check_dtype(dtype)
        self.loss_fn = None if loss is None else _losses.get(loss)
        self.batch_size, self.device_options = batch_size, device_options
        params = net.init_params(seed) if params is None else params
        _reference.check_params(net, params)
        self.layers = torch.nn.ModuleList()
        for p in params:
            layer = torch.nn.Module()
            for key, value in p.items():
                layer.register_parameter(
                    key, torch.nn.Parameter(torch.tensor(np.asarray(value), dtype=dtype))
                )
            self.layers.append(layer)
        self._engine: Model | None = None

    # -- helpers for the autograd functions ----------------------------------------------

    def _check_dtype(self, dtype) -> None:
        if dtype not in (torch.float32, torch.float64):
            raise TypeError(
                f"SpikingNetwork computes in torch.float32 or torch.float64, its parameters "
                f"are {dtype}; use .float() or .double()"
            )
        if self.device_name in ENGINE_DEVICES and dtype != torch.float32:
            raise TypeError(
                f"device {self.device_name!r} computes in float32, the parameters are "
                f"{dtype}; use dtype=torch.float32 (.float()) or device='reference'"
            )

    @property
    def dtype(self):
        """The parameters' dtype, in which the network computes (checked at every call)."""
        dtype = self.layers[0].weight.dtype
        self._check_dtype(dtype)
        return dtype

    @property
    def np_dtype(self):
        return np.float64 if self.dtype == torch.float64 else np.float32

    def weights(self) -> list:
        return [w for layer in self.layers for w in layer.parameters()]

    def numpy_params(self) -> list:
        """The current weights in popsnn's layout (NumPy copies)."""
        return [
            {k: _numpy(v, self.np_dtype).copy() for k, v in layer.named_parameters()}
            for layer in self.layers
        ]

    def tensors_like(self, grads, device) -> list:
        """popsnn gradients as tensors in the order of `weights()`."""
        return [
            torch.from_numpy(np.ascontiguousarray(g[k], self.np_dtype)).to(device)
            for g, layer in zip(grads, self.layers)
            for k, _ in layer.named_parameters()
        ]

    def steps_for(self, x) -> int | None:
        if x.dim() == 2 and self.num_steps is None:
            raise ValueError(
                f"input of shape {tuple(x.shape)} is direct current [B, N]: build "
                f"SpikingNetwork(..., num_steps=T), or pass x as [T, B, N]"
            )
        return self.num_steps if x.dim() == 2 else None

    def _check_input(self, x) -> torch.Tensor:
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
        if x.is_complex():
            raise TypeError(f"x must hold real numbers, got {x.dtype}; pass x.real or x.abs()")
        n = self.net.num_inputs
        if x.dim() not in (2, 3) or x.shape[-1] != n:
            raise ValueError(
                f"x has shape {tuple(x.shape)}; expected [T, B, {n}] or [B, {n}] "
                f"(direct current, with num_steps)"
            )
        return x.to(self.dtype)

    def _engine_model(self, x) -> Model:
        batch = x.shape[x.dim() - 2]
        if self._engine is None:
            batch = self.batch_size or batch
            steps = self.num_steps or (x.shape[0] if x.dim() == 3 else None)
            self._engine = Model(
                self.net,
                loss=self.loss_fn,
                device=self.device_name,
                num_steps=steps,
                batch_size=batch,
                params=self.numpy_params(),
                **self.device_options,
            )
        elif batch > self._engine.batch_size:
            raise ValueError(
                f"x holds {batch} samples, more than the {self._engine.batch_size} the "
                f"{self.device_name!r} engine was compiled for (batch_size, else the first "
                f"batch); build SpikingNetwork(..., batch_size={batch}) or larger"
            )
        elif x.dim() == 3 and x.shape[0] != self._engine.num_steps:
            raise ValueError(
                f"x has {x.shape[0]} time steps, the {self.device_name!r} engine was compiled "
                f"for {self._engine.num_steps} (num_steps, else the first input's); build "
                f"SpikingNetwork(..., num_steps={x.shape[0]}) for this length"
            )
        else:
            self._engine.set_params(self.numpy_params())
        return self._engine

    def loss_and_grads(self, x, y):
        """(loss value, parameter gradients, input gradient or None) from the device."""
        # The labels keep their dtype: the loss refuses float labels rather than truncate.
        y = y.detach().cpu().numpy() if isinstance(y, torch.Tensor) else np.asarray(y)
        xs = _numpy(x, self.np_dtype)
        if self.device_name in ENGINE_DEVICES:
            if not x.requires_grad:
                value, grads = self._engine_model(x).loss_and_grad(xs, y)
                return value, grads, None
            return self._engine_model(x).loss_and_input_grad(xs, y)
        params = self.numpy_params()
        rec = _reference.forward(self.net, params, xs, self.steps_for(x))
        spikes, membranes = rec.spikes[-1], rec.membranes[-1]
        value = self.loss_fn(spikes, membranes, y)
        d_s, d_u = self.loss_fn.backward(spikes, membranes, y)
        grads, d_x = _reference.backward(self.net, params, rec, d_s, d_u, input_grad=True)
        return value, grads, d_x

    # -- the module's interface --------------------------------------------------------------

    def forward(self, x):
        """(spikes, membranes) of the output layer, [T, B, C] each (membranes None on engine
        devices, where this is inference)."""
        x = self._check_input(x)
        if self.device_name in ENGINE_DEVICES:
            if torch.is_grad_enabled() and (
                x.requires_grad or any(w.requires_grad for w in self.weights())
            ):
                raise ValueError(
                    f"on device {self.device_name!r} forward() is inference: call "
                    f"it under torch.no_grad(), and train with loss(x, y) (or use "
                    f"device='reference' for any PyTorch loss)"
                )
            spikes = self._engine_model(x).infer(_numpy(x, np.float32))
            return torch.from_numpy(spikes).to(x.device), None
        return _Forward.apply(self, x, *self.weights())

    def loss(self, x, y) -> torch.Tensor:
        """The popsnn loss given at construction, as a scalar tensor with gradients."""
        if self.loss_fn is None:
            raise ValueError(
                "loss() needs a popsnn loss: build SpikingNetwork(..., "
                "loss='ce_count') (any name in popsnn.losses.NAMES)"
            )
        return _Loss.apply(self, self._check_input(x), y, *self.weights())

    def get_params(self) -> list:
        """The weights in popsnn's layout, e.g. for popsnn.Model or export_to_nir."""
        return self.numpy_params()

    def extra_repr(self) -> str:
        return f"device={self.device_name!r}, num_steps={self.num_steps}, net={self.net!r}"
