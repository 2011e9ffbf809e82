"""Model(dtype="float16") and `popsnn train --dtype`: loss scaling as torch.cuda.amp's
GradScaler (an overflowing step is skipped and the scale backs off; good steps grow it), float32
master weights, training that still learns, and every bad option refused in one line."""

import numpy as np
import pytest
from test_cli_train import popsnn_cli  # pytest puts this folder on sys.path

import popsnn
from popsnn import losses, optim, precision
from popsnn.train_config import ConfigError, make_config

T, B = 8, 16


def _net():
    return popsnn.Sequential(
        popsnn.Linear(12, 24), popsnn.Leaky(beta=0.9), popsnn.Linear(24, 4), popsnn.Leaky(beta=0.9)
    )


def _batch(seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 4, B)
    x = (rng.random((B, 12)) * 0.4 + np.repeat(np.eye(4), 3, axis=1)[y]).astype(np.float32)
    return x, y


def _model(**kw):
    kw.setdefault("optimizer", optim.Adam(lr=5e-3))
    return popsnn.Model(
        _net(), loss=losses.ce_count_loss(), device="reference", num_steps=T, batch_size=B, **kw
    )


def test_an_overflowing_step_is_skipped_and_the_scale_backs_off():
    model = _model(dtype="float16", loss_scale=precision.LossScaler(2.0**40))
    before = model.get_params()
    x, y = _batch()
    model.train_step(x, y)  # dL/dS * 2**40 is far beyond half's 65504: inf
    assert model.loss_scaler.skipped_steps == 1 and model.loss_scaler.scale == 2.0**39
    for p0, p1 in zip(before, model.get_params()):
        for key in p0:
            np.testing.assert_array_equal(p0[key], p1[key])  # nothing applied
    for _ in range(40):  # backs off until the gradients fit, then applies steps
        model.train_step(x, y)
    scaler = model.loss_scaler
    assert 1 < scaler.skipped_steps < 40 and scaler.scale < 2.0**39
    assert any(
        not np.array_equal(p0[k], p1[k]) for p0, p1 in zip(before, model.get_params()) for k in p0
    )
    profile = model.profile()
    assert profile["dtype"] == "float16" and profile["skipped_steps"] == scaler.skipped_steps


def test_the_scale_grows_after_growth_interval_finite_steps_and_a_static_one_stays():
    scaler = precision.LossScaler(8.0, growth_interval=3)
    finite = [{"weight": np.ones(2, np.float32)}]
    overflow = [{"weight": np.array([1.0, np.inf], np.float32)}]
    assert [scaler.update(finite) for _ in range(3)] == [True] * 3 and scaler.scale == 16.0
    assert scaler.update(overflow) is False and scaler.scale == 8.0
    assert scaler.update(finite) and scaler.scale == 8.0  # the run of good steps restarted
    static = precision.make_scaler("float16", 512)
    assert not static.update([{"w": np.array([np.nan], np.float32)}])
    assert static.scale == 512.0 and static.skipped_steps == 1
    assert precision.make_scaler("float16", "dynamic").scale == 2.0**16
    assert precision.make_scaler("float32", None) is None


def test_half_keeps_float32_master_weights_and_learns_like_float32():
    x, y = _batch()
    results = {}
    for dtype in ("float32", "float16"):
        model = _model(dtype=dtype)
        losses_seen = [model.train_step(x, y)[0] for _ in range(30)]
        params = model.get_params()
        assert all(v.dtype == np.float32 for p in params for v in p.values())
        results[dtype] = (losses_seen, model.accuracy(model.infer(x), y))
    loss16, acc16 = results["float16"]
    loss32, acc32 = results["float32"]
    assert loss16[-1] < 0.5 * loss16[0]  # it learns
    assert abs(loss16[-1] - loss32[-1]) < 0.25 * loss32[0] and abs(acc16 - acc32) <= 0.125
    # Weights that moved less than half's resolution still moved: float32 masters.
    model = _model(dtype="float16", optimizer=optim.SGD(lr=1e-6))
    w0 = model.get_params()[0]["weight"]
    model.train_step(x, y)
    assert not np.array_equal(model.get_params()[0]["weight"], w0)


def test_infer_and_record_use_half_storage():
    model = _model(dtype="float16")
    x, _ = _batch()
    rec = model.record(x)
    u = rec.membranes[0]
    np.testing.assert_array_equal(u, u.astype(np.float16).astype(np.float32))
    np.testing.assert_array_equal(model.infer(x), rec.spikes[-1])


def _alpha_net():
    return popsnn.Sequential(
        popsnn.Linear(12, 24),
        popsnn.Alpha(alpha=0.85, beta=0.6, learn_beta=True, learn_threshold=True),
        popsnn.Linear(24, 4),
        popsnn.Leaky(beta=0.9 + np.linspace(-0.05, 0.05, 4), learn_beta=True),
    )


def test_alpha_and_learned_constants_in_half_keep_float32_masters():
    """Alpha's E and H are stored like U; learned beta and threshold are parameters: read as
    half, updated as float32 masters (docs/numerics.md section 8). device="auto" runs the
    network on the reference (the engine's half path learns neither yet); an engine device
    is refused in one line."""
    kw = dict(loss=losses.ce_count_loss(), num_steps=T, batch_size=B, dtype="float16")
    model = popsnn.Model(_alpha_net(), optimizer=optim.SGD(lr=1e-6), device="auto", **kw)
    assert model.device == "reference"
    x, y = _batch()
    rec = model.record(x)
    for stored in (rec.membranes[0], rec.currents[0], rec.membranes[1]):
        np.testing.assert_array_equal(stored, stored.astype(np.float16).astype(np.float32))
    before = model.get_params()
    model.train_step(x, y)
    after = model.get_params()
    for key in ("beta", "threshold"):  # moved by far less than half's spacing near 0.6, 1
        assert after[0][key].dtype == np.float32
        assert 0 < abs(float(after[0][key] - before[0][key])) < 1e-4
    assert after[1]["beta"].dtype == np.float32 and after[1]["beta"].shape == (4,)
    with pytest.raises(ValueError) as err:
        popsnn.Model(_alpha_net(), device="cpu", **kw)
    assert "dtype='float16' on the engine does not learn beta or threshold" in str(err.value)
    assert "\n" not in str(err.value)


def test_device_auto_runs_float16_and_float32_on_the_engine():
    """The engine trains Linear + Leaky networks in half (docs/numerics.md section 8): "auto"
    picks the engine device for both dtypes (the reference where the engine is not built)."""
    kw = dict(loss=losses.ce_count_loss(), num_steps=T, batch_size=B, device="auto")
    half = popsnn.Model(_net(), dtype="float16", **kw)
    assert half.device == popsnn.model.resolve_device("auto") and half.loss_scaler is not None
    single = popsnn.Model(_net(), **kw)
    assert single.device == popsnn.model.resolve_device("auto")


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(dtype="bfloat16"), "dtype must be 'float32' or 'float16' (half storage, float32"),
        (dict(dtype=np.float64), "dtype must be 'float32' or 'float16'"),
        (dict(loss_scale=128.0), "loss_scale applies to dtype='float16' only"),
        (dict(dtype="float16", loss_scale=-1), "loss_scale must be 'dynamic' or a finite number"),
        (dict(dtype="float16", loss_scale="auto"), "loss_scale must be 'dynamic' or a finite"),
    ],
)
def test_bad_precision_options_are_one_clear_line(kwargs, message):
    kwargs.setdefault("device", "reference")
    with pytest.raises(ValueError) as err:
        popsnn.Model(_net(), num_steps=T, batch_size=B, **kwargs)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_float16_with_float64_parameters_is_refused():
    params = _net().init_params(0, np.float64)
    with pytest.raises(ValueError, match="keeps float32 master weights; the parameters given"):
        popsnn.Model(_net(), device="reference", dtype="float16", params=params)


def test_config_reads_dtype_and_loss_scale_from_toml_and_checks_them(tmp_path):
    toml = tmp_path / "half.toml"
    toml.write_text('dtype = "float16"\ndevice = "reference"\nloss-scale = 1024\n')
    config = make_config(toml)
    options = config.precision_options()
    assert options["dtype"] == "float16" and not options["loss_scale"].dynamic
    assert options["loss_scale"].scale == 1024.0
    assert (
        make_config(dtype="float16", device="reference").precision_options()["loss_scale"].dynamic
    )
    assert make_config(dtype="float16").precision_options()["dtype"] == "float16"  # auto
    assert make_config(dtype="float16", device="cpu").precision_options()["dtype"] == "float16"
    with pytest.raises(ConfigError, match="loss_scale applies to --dtype float16 only"):
        make_config(loss_scale="512")


@pytest.mark.parametrize(
    "args, message",
    [
        (["--dtype", "half16"], "dtype must be 'float32' or 'float16'"),
        (["--dtype", "float16", "--loss-scale", "x"], "loss_scale must be 'dynamic' or a finite"),
    ],
)
def test_cli_bad_dtype_is_one_line(tmp_path, args, message):
    r = popsnn_cli("train", "--device", "reference", "--output", str(tmp_path), *args)
    assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_cli_trains_in_half(tmp_path):
    """Without --device: "auto" picks the engine (the reference where it is not built)."""
    import json

    out = tmp_path / "run"
    r = popsnn_cli(
        "train", "--dtype", "float16", "--hidden", "64",
        "--num-steps", "8", "--epochs", "2", "--limit-train", "1000", "--limit-test", "300",
        "--batch-size", "100", "--lr", "0.002", "--no-plots", "--no-progress",
        "--output", str(out),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    summary = json.loads((out / "metrics.json").read_text())["summary"]
    assert summary["dtype"] == "float16" and summary["test_accuracy"] > 0.3  # chance: 0.1
    assert summary["device"] == popsnn.model.resolve_device("auto")
    history = json.loads((out / "metrics.json").read_text())["history"]
    assert history["loss_scale"] == [2.0**16, 2.0**16]  # no overflow: the scale held


def test_a_resumed_half_run_starts_from_the_saved_loss_scale(tmp_path):
    from popsnn import checkpoint, train

    model = _model(dtype="float16")
    history = {"epoch": [1], "loss_scale": [1024.0]}
    path = tmp_path / "c.npz"
    checkpoint.save(
        path,
        net=model.net,
        params=model.get_params(),
        optimizer_state=model.optimizer_state(),
        epoch=1,
        rng_state=np.random.default_rng(0).bit_generator.state,
        config={},
        history=history,
    )
    fresh = _model(dtype="float16")
    epoch, _ = train._resume(fresh, np.random.default_rng(1), path, {"epoch": []})
    assert epoch == 1 and fresh.loss_scaler.scale == 1024.0


class _OneRankComm:
    """The two mpi4py calls DataParallelModel makes, for a world of one rank."""

    def Allreduce(self, send, recv):  # noqa: N802 -- mpi4py's name
        recv[...] = send

    def allgather(self, local):
        return [local]


def test_data_parallel_steps_go_through_the_loss_scaler():
    from popsnn.distributed import DataParallelModel, World

    x, y = _batch()
    single = _model(dtype="float16", loss_scale=precision.LossScaler(2.0**40))
    parallel = DataParallelModel(
        _model(dtype="float16", loss_scale=precision.LossScaler(2.0**40)),
        World(0, 1, _OneRankComm()),
    )
    before = parallel.get_params()
    parallel.train_step(x, y)  # overflows: skipped on every rank alike
    assert parallel.loss_scaler.skipped_steps == 1 and parallel.loss_scaler.scale == 2.0**39
    for p0, p1 in zip(before, parallel.get_params()):
        for key in p0:
            np.testing.assert_array_equal(p0[key], p1[key])
    single.train_step(x, y)
    for _ in range(30):
        single.train_step(x, y)
        parallel.train_step(x, y)
    assert parallel.loss_scaler.state_dict() == single.loss_scaler.state_dict()
    for p0, p1 in zip(single.get_params(), parallel.get_params()):
        for key in p0:
            np.testing.assert_allclose(p1[key], p0[key], rtol=1e-5, atol=1e-7)
