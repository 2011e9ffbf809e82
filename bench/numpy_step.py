"""A strong, straightforward NumPy training step: the yardstick "a user would write in an
afternoon" for a feed-forward Leaky network trained with BPTT, ce_count and Adam.

Nothing clever, only what a careful NumPy user does:
* layer by layer, not step by step: a layer's membrane loop runs over all T steps first, so
  the next layer's input current for every step is ONE matrix product [T*B, n] x [n, m];
* direct-current input: the first layer's current `W x + b` and its weight gradient
  `(sum_t dI[t])^T x` are computed once per minibatch (hoisted out of the time loop);
* the backward mirrors it: the membrane-gradient carry is the only loop over time, and the
  weight and input gradients are one BLAS product per layer over all steps;
* BLAS (NumPy's) on the machine's threads; buffers preallocated; Adam in place.

The arithmetic is popsnn's contract (the dense reference in `popsnn.reference`): the reset of
step t is decided by the previous membrane and is a constant in BPTT; the smoke test checks
loss and gradients against the reference.
"""

from __future__ import annotations

import numpy as np

import popsnn


def unsupported(net, loss, x) -> str | None:
    """Why this step cannot run the workload, or None."""
    if not net.is_linear:
        return "the hand-written NumPy step runs Linear layers only (no Conv2d / pooling)"
    for _, neuron in net.pairs:
        if type(neuron) is not popsnn.Leaky:
            return f"the hand-written NumPy step implements Leaky only, got {type(neuron).__name__}"
        if neuron.sparse is not None:
            return "the hand-written NumPy step has no sparse rule"
    if loss.name != "ce_count":
        return f"the hand-written NumPy step implements ce_count only, got {loss.name}"
    return None


class NumpyStep:
    """`step(x, y)`: forward, ce_count loss, BPTT, Adam update of `params` (popsnn's layout:
    one dict per layer with "weight" [out, in] and optional "bias" [out])."""

    def __init__(
        self, net, params, num_steps, num_classes=None, lr=5e-4, betas=(0.9, 0.999), eps=1e-8
    ):
        self.neurons = [n for _, n in net.pairs]
        self.params = params
        self.T = num_steps
        self.num_classes = num_classes
        self.lr, self.betas, self.eps, self.t_adam = lr, betas, eps, 0
        self.moments = [
            {k: (np.zeros_like(v), np.zeros_like(v)) for k, v in p.items()} for p in params
        ]
        self.buffers = {}

    def _buffer(self, key, shape, dtype):
        """An array kept from step to step: fresh multi-megabyte arrays every step would be
        page-faulted in again each time."""
        buf = self.buffers.get(key)
        if buf is None or buf.shape != tuple(shape) or buf.dtype != dtype:
            buf = self.buffers[key] = np.empty(shape, dtype)
        return buf

    # ------------------------------------------------------------------ forward
    def _layer_forward(self, l, neuron, current):
        """Membranes and spikes [T, B, n] of layer l (Leaky); `current` is [B, n] (the same
        every step) or [T, B, n]."""
        T = self.T
        f = current.dtype.type
        beta, theta = f(neuron.beta), f(neuron.threshold)
        shape = (T,) + current.shape[-2:]
        U = self._buffer(("U", l), shape, current.dtype)
        S = self._buffer(("S", l), shape, current.dtype)
        u_prev = np.zeros(shape[1:], current.dtype)
        s_prev = np.zeros(shape[1:], current.dtype)  # reset R[t] = H(U[t-1] - theta) = S[t-1]
        tmp = self._buffer(("tmp", l), shape[1:], current.dtype)
        for t in range(T):  # in place: no temporaries
            u = U[t]
            if neuron.reset_mechanism == "zero":
                np.subtract(1, s_prev, out=tmp)
                tmp *= beta
                np.multiply(u_prev, tmp, out=u)
            else:
                np.multiply(u_prev, beta, out=u)
            u += current if current.ndim == 2 else current[t]
            if neuron.reset_mechanism == "subtract":
                np.multiply(s_prev, theta, out=tmp)
                u -= tmp
            np.greater(u, theta, out=S[t], casting="unsafe")
            u_prev, s_prev = u, S[t]
        return U, S

    @staticmethod
    def _surrogate(neuron, u, out):
        """dS/dU at u - threshold into `out`; atan (the bench's surrogate) in place, the
        others by popsnn's formula."""
        f = u.dtype.type
        sur = neuron.surrogate
        if sur.name != "atan":
            out[...] = sur.grad(u - f(neuron.threshold))
            return
        a = f(sur.param)
        np.subtract(u, f(neuron.threshold), out=out)  # (a/2) / (1 + (pi a x / 2)^2)
        out *= f(np.pi) * a / f(2)
        np.square(out, out=out)
        out += f(1)
        np.divide(a / f(2), out, out=out)

    def _membrane_grads(self, l, neuron, U, g_spikes):
        """dL/dU[t] for every t, from the last step back, one [B, n] slice at a time (so it
        stays in cache): dU[t] = dS/dU[t] dL/dS[t] + beta (1 - R[t+1]) dU[t+1]; and their
        sum over t (what the hoisted weight gradient and the bias need)."""
        f = U.dtype.type
        beta, theta = f(neuron.beta), f(neuron.threshold)
        dU = self._buffer(("dU", l), U.shape, U.dtype)
        total = self._buffer(("dU_sum", l), U.shape[1:], U.dtype)
        carry = self._buffer(("tmp", l), U.shape[1:], U.dtype)
        for t in range(self.T - 1, -1, -1):
            d = dU[t]
            self._surrogate(neuron, U[t], d)
            d *= g_spikes[t if len(g_spikes) > 1 else 0]
            if t == self.T - 1:
                total[...] = d
                continue
            np.multiply(dU[t + 1], beta, out=carry)
            if neuron.reset_mechanism == "zero":  # R[t+1] = H(U[t] - theta)
                carry *= U[t] <= theta
            d += carry
            total += d
        return dU, total

    def forward(self, x):
        """Membranes and spikes of every layer; x is [B, N] (direct) or [T, B, N]."""
        record, layer_in = [], x
        for l, (neuron, p) in enumerate(zip(self.neurons, self.params)):
            w = p["weight"]
            if layer_in.ndim == 2:  # hoisted: W x once for all steps
                current = self._buffer(("I", l), (layer_in.shape[0], w.shape[0]), w.dtype)
                np.matmul(layer_in, w.T, out=current)
            else:
                T, B, n = layer_in.shape
                current = self._buffer(("I", l), (T, B, w.shape[0]), w.dtype)
                np.matmul(layer_in.reshape(T * B, n), w.T, out=current.reshape(T * B, -1))
            if "bias" in p:
                current += p["bias"]
            U, S = self._layer_forward(l, neuron, current)
            record.append((U, S))
            layer_in = S
        return record

    # ------------------------------------------------------------------ loss
    def _loss(self, S_out, y):
        """ce_count: cross-entropy of the class spike counts; value and dL/dcounts [B, C]."""
        T, B, C = S_out.shape
        k = self.num_classes or C
        counts = S_out.sum(axis=0).reshape(B, k, C // k).sum(axis=-1)
        z = counts - counts.max(axis=1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
        value = -logp[np.arange(B), y].mean()
        d = np.exp(logp)
        d[np.arange(B), y] -= 1
        d /= d.dtype.type(B)
        return float(value), np.repeat(d, C // k, axis=1)  # per output neuron

    # ------------------------------------------------------------------ backward
    def backward(self, x, record, d_counts):
        """Gradients in the params' layout; d_counts [B, C_out] is dL/dS_out at every step."""
        grads = [None] * len(self.params)
        g_spikes = d_counts[None]  # broadcast over T
        for l in reversed(range(len(self.params))):
            neuron, p = self.neurons[l], self.params[l]
            dU, dU_sum = self._membrane_grads(l, neuron, record[l][0], g_spikes)
            layer_in = x if l == 0 else record[l - 1][1]
            n = dU.shape[-1]
            g = {}
            if layer_in.ndim == 2:  # hoisted: (sum_t dI[t])^T x, once
                g["weight"] = dU_sum.T @ layer_in
            else:
                g["weight"] = dU.reshape(-1, n).T @ layer_in.reshape(-1, layer_in.shape[-1])
            if "bias" in p:
                g["bias"] = dU_sum.sum(axis=0)
            grads[l] = g
            if l > 0:
                T, B = dU.shape[:2]
                g_spikes = self._buffer(("dS", l - 1), (T, B, p["weight"].shape[1]), dU.dtype)
                np.matmul(dU.reshape(T * B, n), p["weight"], out=g_spikes.reshape(T * B, -1))
        return grads

    def loss_and_grad(self, x, y):
        record = self.forward(x)
        value, d_counts = self._loss(record[-1][1], y)
        return value, self.backward(x, record, d_counts)

    # ------------------------------------------------------------------ update
    def adam(self, grads):
        """torch.optim.Adam's update, in place."""
        self.t_adam += 1
        b1, b2 = self.betas
        step_size = self.lr / (1 - b1**self.t_adam)
        root = np.sqrt(1 - b2**self.t_adam)
        for p, g, mom in zip(self.params, grads, self.moments):
            for k, w in p.items():
                f = w.dtype.type
                m, v = mom[k]
                grad = g[k]
                m += f(1 - b1) * (grad - m)
                v *= f(b2)
                grad *= grad  # the gradient is not needed after
                grad *= f(1 - b2)
                v += grad
                denom = np.sqrt(v)
                denom /= f(root)
                denom += f(self.eps)
                np.divide(m, denom, out=denom)
                denom *= f(step_size)
                w -= denom

    def step(self, x, y):
        value, grads = self.loss_and_grad(x, y)
        self.adam(grads)
        return value
