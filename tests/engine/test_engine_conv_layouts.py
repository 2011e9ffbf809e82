"""The convolution's backward on both layouts of dL/dI (codelets/Conv.cpp, ConvKernels.hpp):
channels-last, which a 2 x 2 max pool at stride 2 tiling the map leaves (the CSNN's pools:
its gradient and argmax read in place), and planar, which every other pool and no pool leave; each
against the reference's ops in float64 (test_engine_conv.py's helpers), on 1 and several
tiles, at full dL/dI and at a sparse rule's few entries (the weight gradient then takes the
product by gradients). And the window runs' bound: an inf in dL/dI gives inf on its window
only, not NaN on the entries past each run (the runs' zero padding times inf)."""

from __future__ import annotations

import numpy as np
import pytest
from test_engine_conv import assert_close, check_stage, make, reference_stage, run, stage_spec


@pytest.mark.parametrize("density", [1.0, 0.05])
@pytest.mark.parametrize("tiles", [1, 6])
@pytest.mark.parametrize(
    "in_side", [12, 11], ids=["channels_last_pool_tiles_map", "planar_pool_leaves_a_column"]
)
def test_backward_on_both_layouts_of_dl_di(in_side, tiles, density):
    # 12 -> conv 5 -> 8 (a 2x2 pool tiles it: channels-last); 11 -> 7 (it does not: planar).
    spec = stage_spec(
        6, in_shape=(3, in_side, in_side), out_channels=8, kernel=5, pools=[("max", 2, 2, 0)]
    )
    got = check_stage(spec, seed=11, grad_density=density, type="ipu-model", tiles_per_ipu=tiles)
    # dL/dI is at most one entry per pool window (25%): the window runs on every row.
    assert got["input_grad_dense_rows"] == 0


@pytest.mark.parametrize("tiles", [1, 6])
def test_an_inf_in_dl_di_reaches_its_window_only(tiles):
    # 3 channels x 3 columns = 9 floats a run, padded to whole vectors: the padding's lanes
    # fall on the next column's entries, which an inf coefficient must not touch. (No pool:
    # the reference's max-pool backward multiplies the inf by its mask's zeros.)
    spec = stage_spec(4, in_shape=(3, 10, 10), out_channels=4, kernel=3)
    x, weight, bias, d_out = make(spec, 12, True, grad_density=0.2)
    d_out[1, 2, 1, 1] = np.inf
    got = run(spec, x, weight, bias, d_out, type="ipu-model", tiles_per_ipu=tiles)
    with np.errstate(invalid="ignore"):  # the reference's dL/dW: inf times the input's zeros
        _, _, _, dx, _ = reference_stage(spec, x, weight, bias, d_out)
    got_dx = np.asarray(got["grad_input"], np.float64).reshape(dx.shape)
    assert np.isinf(dx).any() and not np.isnan(dx).any()
    assert not np.isnan(got_dx).any(), "NaN past a window run"
    assert (np.isinf(got_dx) == np.isinf(dx)).all()
    assert (np.sign(got_dx[np.isinf(dx)]) == np.sign(dx[np.isinf(dx)])).all()
    finite = np.isfinite(dx)
    assert_close(got_dx[finite], dx[finite], "dL/dx off the inf's window")
