"""Every system timed in its own worker process, so that no system's thread pool is in
another's way.

Why: NumPy's OpenBLAS, PyTorch's OpenMP/MKL pools and popsnn's engine each keep worker
threads, and OpenBLAS's and OpenMP's keep *spinning* for a while after their call returns
(OpenBLAS up to about 2^28 cycles, ~0.1 s). Timed in one process right after a NumPy or
PyTorch step, popsnn's engine shared this 2-core machine with those spinning threads and ran
2-3x slower than on its own (an A/B in bench/README.md). Here:

* each (system, thread setting) is one long-lived worker process (`python bench/workers.py`),
  started once per benchmark run and reused for every configuration; its thread settings are
  fixed in its environment before NumPy, PyTorch or popsnn is imported (`OMP_NUM_THREADS`,
  `OPENBLAS_NUM_THREADS`, `MKL_NUM_THREADS`, `POPSNN_NUM_THREADS`; nothing is set for
  "default");
* the parent sends the workload (pickled: the same network, inputs and labels for all), the
  worker builds its step and runs the warm-up; then the parent asks the workers in turn for
  one timed step each, round by round, so that load from other users still falls on every
  system alike; a worker times its steps itself (`time.perf_counter`), so the pipe is not in
  the figure;
* only one worker computes at a time (the others wait on a blocking read of their pipe), and
  the parent sleeps `SETTLE_S` before each turn, so that the previous worker's spinning
  threads have gone to sleep before the next system's steps start;
* a turn is a burst of back-to-back steps (untimed for WARM_S, then timed for TIMED_S), as
  in a training loop: on this machine a short step runs about 2x slower for some tens of
  milliseconds after any pause.

The protocol is pickled tuples over the worker's stdin/stdout (the worker moves library
prints from its stdout to stderr so that they cannot corrupt it).
"""

from __future__ import annotations

import atexit
import os
import pickle
import subprocess
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
THREAD_ENV = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "POPSNN_NUM_THREADS")
# Pause before each turn (seconds), so that the previous worker's idle threads calm down.
SETTLE_S = 0.05
# A turn: untimed steps back to back for at least WARM_S (at least one), then timed steps
# back to back for at least TIMED_S (at least one); the turn's figure is their mean. After
# any pause this machine runs a short step slowly for a while (popsnn's 4.4 ms DSNN step took
# ~9-10 ms after a 10-150 ms pause, even after 1-3 warm steps, and 4.4-4.7 ms after 10): a
# training loop runs its steps back to back, so every system is timed in that state.
WARM_S = 0.1
TIMED_S = 0.1


class WorkerError(RuntimeError):
    """A worker could not build or run its system (the message carries its traceback)."""


class Worker:
    """One system at one thread setting, in its own process."""

    def __init__(self, threads=None):
        env = dict(os.environ)
        if threads is not None:
            for k in THREAD_ENV:
                env[k] = str(threads)
        self.threads = threads
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve())],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            cwd=str(HERE),
        )

    def send(self, *msg):
        pickle.dump(msg, self.proc.stdin, protocol=pickle.HIGHEST_PROTOCOL)
        self.proc.stdin.flush()

    def receive(self):
        try:
            status, value = pickle.load(self.proc.stdout)
        except EOFError:
            raise WorkerError(f"worker {self.proc.pid} exited (code {self.proc.wait()})") from None
        if status == "error":
            raise WorkerError(value)
        return value

    def call(self, *msg):
        self.send(*msg)
        return self.receive()

    def close(self):
        if self.proc.poll() is None:
            try:
                self.send("quit")
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()


_POOL: dict = {}


def worker(system: str, threads=None) -> Worker:
    """The worker of `system` at `threads` (None: the libraries' defaults), started on first
    use and kept for the rest of the run."""
    key = (system, threads)
    w = _POOL.get(key)
    if w is None or w.proc.poll() is not None:
        w = _POOL[key] = Worker(threads)
    return w


@atexit.register
def close_all():
    while _POOL:
        _POOL.popitem()[1].close()


def time_isolated(
    work,
    variants: dict,
    repeats: int,
    warmup: int = 1,
    settle_s: float = None,
    warm_s: float = None,
    timed_s: float = None,
) -> dict:
    """Seconds per training step of each variant {key: (system, threads)} on `work`, each in
    its own worker, interleaved round by round: `repeats` turns per variant, each turn a
    burst of back-to-back steps (see WARM_S). Returns {key: {"min_s", "median_s", "max_s"
    (over turns), "repeats", "timed_steps_per_turn", "threads", "pid", "build_s",
    "warmup_s", "warmup_steps", "peak_rss_bytes", "peak_rss_reset"}} with the thread count the
    worker's library reported and the worker's peak resident memory over set-up, warm-up and
    timing of this workload (its whole life if the peak could not be reset)."""
    import statistics

    settle_s = SETTLE_S if settle_s is None else settle_s
    workers = {k: worker(system, threads) for k, (system, threads) in variants.items()}
    # Set-up concurrently (not timed): every worker builds its step and warms it up.
    for k, w in workers.items():
        w.send("setup", variants[k][0], work, warmup)
    info, errors = {}, []
    for k, w in workers.items():
        try:
            info[k] = w.receive()
        except WorkerError as err:  # read every reply first, so no pipe is left behind
            errors.append(f"{k}: {err}")
    if errors:
        raise WorkerError("\n".join(errors))
    times = {k: [] for k in workers}
    steps = {k: [] for k in workers}
    for _ in range(repeats):
        for k, w in workers.items():
            time.sleep(settle_s)
            per_step, n = w.call(
                "time",
                WARM_S if warm_s is None else warm_s,
                TIMED_S if timed_s is None else timed_s,
            )
            times[k].append(per_step)
            steps[k].append(n)
    peaks = {
        k: w.call("drop")["peak_rss_bytes"]  # the step dropped: an engine model
        for k, w in workers.items()
    }  # can be large
    return {
        k: {
            "min_s": min(v),
            "median_s": statistics.median(v),
            "max_s": max(v),
            "repeats": repeats,
            "timed_steps_per_turn": statistics.mean(steps[k]),
            "peak_rss_bytes": peaks[k],
            **info[k],
        }
        for k, v in times.items()
    }


# --------------------------------------------------------------------------- worker side


def _build(system: str, work):
    import systems

    if system == "popsnn":
        return systems.popsnn_engine(work)
    if system == "snntorch":
        return systems.snntorch(work)
    if system == "snntorch_compiled":
        return systems.snntorch(work, compiled=True)
    if system == "numpy_step":
        return systems.numpy_step(work)
    if system == "limit":
        return systems.dense_products(work)[0]
    if system == "numpy_hoisted":
        return systems.numpy_reference(work, hoist=True)
    if system == "numpy_per_step":
        return systems.numpy_reference(work, hoist=False)
    raise ValueError(f"unknown system {system!r}")


# Warm-up steps before timing: torch.compile may compile again on the second and third calls
# (the optimiser's state appears after the first); the warm-up's time is reported apart.
WARMUP_STEPS = {"snntorch_compiled": 3}


def _threads(system: str) -> int:
    """The thread count the system's library runs with in this process."""
    if system.startswith("snntorch"):
        import torch

        return torch.get_num_threads()
    if system == "popsnn":
        return int(os.environ.get("POPSNN_NUM_THREADS") or os.cpu_count() or 1)
    return int(os.environ.get("OPENBLAS_NUM_THREADS") or os.cpu_count() or 1)


def _reset_peak_rss() -> bool:
    """Start the process's peak-RSS count (VmHWM) afresh (Linux: clear_refs 5), so that a
    reused worker reports the peak of its current system only; False if not possible."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _peak_rss_bytes():
    """This process's peak resident memory (VmHWM) in bytes, or None."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _serve():
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # prints of libraries go to stderr, not into the protocol
    inp = sys.stdin.buffer
    sys.path.insert(0, str(HERE))
    import gc

    step = None

    def reply(status, value):
        pickle.dump((status, value), out, protocol=pickle.HIGHEST_PROTOCOL)
        out.flush()

    while True:
        try:
            msg = pickle.load(inp)
        except EOFError:
            return
        op = msg[0]
        if op == "quit":
            return
        try:
            if op == "setup":
                system, work, warmup = msg[1:]
                step = None
                gc.collect()
                peak_reset = _reset_peak_rss()
                t0 = time.perf_counter()
                step = _build(system, work)
                build_s = time.perf_counter() - t0
                warmup = max(warmup, WARMUP_STEPS.get(system, 0))
                t0 = time.perf_counter()
                for _ in range(warmup):
                    step()
                reply(
                    "ok",
                    {
                        "threads": _threads(system),
                        "pid": os.getpid(),
                        "build_s": build_s,
                        "warmup_s": time.perf_counter() - t0,
                        "warmup_steps": warmup,
                        "peak_rss_reset": peak_reset,
                    },
                )
            elif op == "time":
                warm_s, timed_s = msg[1:]
                t0 = time.perf_counter()
                while True:  # untimed, back to back
                    step()
                    if time.perf_counter() - t0 >= warm_s:
                        break
                n, t0 = 0, time.perf_counter()
                while True:  # timed, back to back
                    step()
                    n += 1
                    elapsed = time.perf_counter() - t0
                    if elapsed >= timed_s:
                        break
                reply("ok", (elapsed / n, n))
            elif op == "drop":
                peak = _peak_rss_bytes()  # before the step is dropped
                step = None
                gc.collect()
                reply("ok", {"peak_rss_bytes": peak})
            elif op == "env":
                reply("ok", {"pid": os.getpid(), **{k: os.environ.get(k) for k in THREAD_ENV}})
            else:
                reply("error", f"unknown request {op!r}")
        except Exception:  # noqa: BLE001 - reported to the parent, which raises it
            reply("error", traceback.format_exc())


if __name__ == "__main__":
    _serve()
