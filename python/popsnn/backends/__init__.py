"""The backends of `popsnn.Model`: one per kind of device, all behind one protocol.

- `reference.ReferenceBackend`: the dense NumPy reference (device "reference").
- `engine.EngineBackend`: the sparse engine compiled into one Poplar graph (devices "cpu",
  "ipu-model", "ipu"); importable only where popsnn's native extension is built.

Backends import nothing from `popsnn.model` (the model picks a backend, not the other way
round), and every backend checks its arguments with `popsnn.validation`, so all devices accept
and refuse the same calls.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["Backend"]


class Backend(Protocol):
    """What `popsnn.Model` needs of a backend. Constructed as
    `cls(net, params, loss, optimizer, *, num_steps, batch_size, device, **device_options)`;
    `x` is [B, N_in] direct current or [T, B, N_in] with T = num_steps, B <= batch_size."""

    def train_step(self, x, y) -> tuple:
        """Forward, backward and optimiser update: (loss, output spikes [T, B, C])."""

    def loss_and_grad(self, x, y) -> tuple:
        """(loss, gradients in the layout of the parameters); nothing is updated."""

    def loss_grad_and_spikes(self, x, y) -> tuple:
        """loss_and_grad plus the output spikes [T, B, C] of the same forward pass (for
        data-parallel steps, which update on the host after an allreduce)."""

    def infer(self, x):
        """Output spikes [T, B, C]."""

    def get_params(self) -> list:
        """A copy of the parameters (one dict of arrays per layer)."""

    def set_params(self, params) -> None:
        """Replace the parameters (checked first)."""

    def optimizer_state(self) -> dict:
        """The optimiser state in popsnn.optim's state_dict format."""

    def load_optimizer_state(self, state) -> None:
        """Load a state_dict, checked in full before anything changes."""

    def set_learning_rate(self, lr) -> None:
        """The learning rate from the next step on."""

    def profile(self) -> dict:
        """Counters and timings of the steps run so far."""
