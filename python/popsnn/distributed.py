"""Data-parallel training over MPI ranks: `mpirun -n N popsnn train ...`.

Every rank holds the whole network and walks the same global batches (the same seed, the same
shuffle); rank r takes its contiguous share of each one (`np.array_split` of the batch into N).
A step is: loss and gradients on the share (any backend's `loss_and_grad`), one MPI allreduce
of the gradients and the loss weighted by share size -- so they are the global batch's, whose
losses are means over samples -- then the same optimiser step on every rank (popsnn.optim on
the host: the ranks' weights stay identical). Inference shards the batch the same way and
gathers the outputs. Rank 0 alone writes checkpoints, metrics and logs (train.py asks
`world().is_root`); every rank reads the checkpoint when resuming.

The ranks are MPI's, so the same design serves an IPU cluster: Graphcore's multi-host launcher
(PopDist / poprun) starts one MPI rank per IPU (or group of IPUs), each with its engine.

MPI is used only when the process was started by an MPI launcher with more than one rank; the
`mpi` extra installs mpi4py and an MPI (`pip install 'popsnn[mpi]'`, mpirun in the venv).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import losses as _losses
from . import reference as _reference

__all__ = [
    "World",
    "world",
    "launched_rank",
    "DataParallelModel",
    "data_parallel",
    "shard",
    "local_batch_size",
]

# Set by Open MPI's and MPICH's (Hydra) launchers in every rank they start.
_SIZE_VARS = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE")
_RANK_VARS = ("OMPI_COMM_WORLD_RANK", "PMI_RANK")


@dataclass(frozen=True)
class World:
    """This process's place among the training processes."""

    rank: int = 0
    size: int = 1
    comm: Any | None = None  # an mpi4py communicator when size > 1

    @property
    def is_root(self) -> bool:
        return self.rank == 0


_WORLD: World | None = None


def _launched_ranks() -> int:
    for var in _SIZE_VARS:
        value = os.environ.get(var, "")
        if value.isdigit():
            return int(value)
    return 1


def launched_rank() -> tuple:
    """(rank, size) as the MPI launcher set them, without starting MPI (error reporting)."""
    size = _launched_ranks()
    for var in _RANK_VARS:
        value = os.environ.get(var, "")
        if size > 1 and value.isdigit():
            return int(value), size
    return 0, 1


def world() -> World:
    """The MPI world when started by an MPI launcher with several ranks, else one process."""
    global _WORLD
    if _WORLD is None:
        ranks = _launched_ranks()
        if ranks <= 1:
            _WORLD = World()
        else:
            try:
                from mpi4py import MPI
            except ImportError:
                raise ImportError(
                    f"popsnn was started as {ranks} MPI ranks but mpi4py is not "
                    f"installed: pip install 'popsnn[mpi]'"
                ) from None
            comm = MPI.COMM_WORLD
            _WORLD = World(comm.Get_rank(), comm.Get_size(), comm)
    return _WORLD


def shard(batch: int, w: World) -> slice:
    """Rank w.rank's contiguous share of a batch of `batch` samples (sizes differ by <= 1)."""
    base, extra = divmod(batch, w.size)
    start = w.rank * base + min(w.rank, extra)
    return slice(start, start + base + (w.rank < extra))


def local_batch_size(batch: int, w: World) -> int:
    """The largest share of a global batch of `batch` samples: what each rank compiles for."""
    return -(-batch // w.size)


def _batch_axis(x) -> int:
    return 0 if np.ndim(x) == 2 else 1  # [B, N] direct current or [T, B, N]


def _on_this_rank(w: World, fn, *args):
    """fn(*args); an error ends every rank (MPI Abort) rather than leaving the others
    waiting in the next collective."""
    try:
        return fn(*args)
    except Exception as err:  # noqa: BLE001 -- any failure must stop the whole job
        print(f"popsnn (rank {w.rank} of {w.size}): error: {err}", file=sys.stderr, flush=True)
        w.comm.Abort(2)
        raise


def _share_step(model, xs, ys):
    """(loss, gradients, output spikes) of this rank's share, from one forward pass."""
    return model.backend.loss_grad_and_spikes(xs, ys)


class DataParallelModel:
    """A `popsnn.Model` trained data-parallel over `w`'s ranks; the Model's interface."""

    def __init__(self, model, w: World):
        self.model, self.world = model, w
        self.optimizer = model.optimizer  # popsnn.optim, stepped on the host on every rank
        self.allreduced_bytes_per_step = 0
        self._shapes = _reference.param_shapes(model.net)
        self._dtype = np.dtype(next(iter(model.get_params()[0].values())).dtype)

    def __getattr__(self, name):  # net, loss, device, accuracy, record, num_classes
        return getattr(self.model, name)

    def _take(self, x, y=None):
        x = np.asarray(x)
        part = shard(x.shape[_batch_axis(x)], self.world)
        xs = x[part] if _batch_axis(x) == 0 else x[:, part]
        return xs, (None if y is None else np.asarray(y)[part]), part

    def _reduce(self, value, grads, count, batch):
        """Global loss and gradients: one allreduce of every gradient and the loss, weighted
        by share size, in the weights' dtype."""
        if not count:  # fewer samples than ranks: this rank adds nothing
            value, grads = (
                0.0,
                [{k: np.zeros(shape, self._dtype) for k, shape in s.items()} for s in self._shapes],
            )
        keys = [(l, k) for l, s in enumerate(self._shapes) for k in s]
        flat = np.concatenate(
            [np.ravel(grads[l][k]).astype(self._dtype, copy=False) for l, k in keys]
            + [np.array([value], self._dtype)]
        )
        flat *= self._dtype.type(count)
        total = np.empty_like(flat)
        self.world.comm.Allreduce(flat, total)  # MPI.SUM is the default op
        self.allreduced_bytes_per_step = flat.nbytes
        total /= self._dtype.type(batch)
        out, at = [dict() for _ in self._shapes], 0
        for l, k in keys:
            size = int(np.prod(self._shapes[l][k]))
            out[l][k] = total[at : at + size].reshape(self._shapes[l][k])
            at += size
        return float(total[-1]), out

    def _gather(self, local):
        """The global batch's output spikes [T, B, C] from every rank's share."""
        return np.concatenate(
            [p for p in self.world.comm.allgather(local) if p is not None], axis=1
        )

    def loss_and_grad(self, x, y):
        """The global batch's loss and gradients (identical on every rank)."""
        xs, ys, part = self._take(x, y)
        count = part.stop - part.start
        value, grads = (
            _on_this_rank(self.world, self.model.loss_and_grad, xs, ys) if count else (0.0, None)
        )
        return self._reduce(value, grads, count, len(np.asarray(y)))

    def train_step(self, x, y):
        xs, ys, part = self._take(x, y)
        count = part.stop - part.start
        value, grads, local = (
            _on_this_rank(self.world, _share_step, self.model, xs, ys)
            if count
            else (0.0, None, None)
        )
        value, grads = self._reduce(value, grads, count, len(np.asarray(y)))
        # float16: the allreduced gradients are the same on every rank, so every rank's loss
        # scaler skips (an inf or NaN reached the sum) or applies the same step.
        scaler = self.model.loss_scaler
        if scaler is None or scaler.update(grads):
            params = self.model.get_params()
            self.optimizer.step(params, grads)
            self.model.set_params(params)
        return value, self._gather(local)

    def infer(self, x):
        xs, _, part = self._take(x)
        local = _on_this_rank(self.world, self.model.infer, xs) if part.stop > part.start else None
        return self._gather(local)

    def optimizer_state(self) -> dict:
        return self.optimizer.state_dict()

    def load_optimizer_state(self, state) -> None:
        self.optimizer.load_state_dict(state)

    def set_learning_rate(self, lr) -> None:
        self.model.set_learning_rate(lr)  # checks lr, keeps the backend's copy in step

    def profile(self) -> dict:
        return dict(
            self.model.profile(),
            mpi_ranks=self.world.size,
            allreduced_bytes_per_step=self.allreduced_bytes_per_step,
        )


def data_parallel(model, w: World | None = None):
    """`model` itself in a single process, else a DataParallelModel over the MPI ranks."""
    w = world() if w is None else w
    if w.size == 1:
        return model
    if not isinstance(model.loss, _losses.Loss):
        raise TypeError(f"data-parallel training needs a popsnn.losses loss, got {model.loss!r}")
    return DataParallelModel(model, w)
