"""ConvInputGrad when one window covers the whole input (a single output position: a Linear
stage, the CSNN's readout): consecutive rows that take the dense product are one product
written straight into dL/dx, the other rows take the window runs. dL/dI rows mixed dense
and sparse (runs of product rows broken anywhere, also across the ipu-model's workers),
against the reference's ops in float64 (test_engine_conv.py's helpers), and the rows that
took the product counted per shard from dL/dI's non-zeros (the choice per row and shard
unchanged: 50% non-zero without column padding). And the 2 x 2 max pool's backward folded into
the gradient vertices on padded convolutions (the input gradient's entries listed from the
pool's gradient into col rows, or window runs), at full and 10% dL/dI."""

from __future__ import annotations

import numpy as np
import pytest
from test_engine_conv import (
    ON_DEVICES,
    assert_close,
    check_stage,
    make,
    reference_stage,
    run,
    stage_spec,
)

ROWS = 9
SPARSE_ROWS = (2, 3, 6)  # rows [0, 2), [4, 6), [7, 9) take the product on every shard


def expected_dense_rows(plan, d_out):
    """Rows taking the product, summed over the shards (tile, c0, channels, r0, rows)."""
    count = 0
    for _, c0, nc, r0, nr in plan["shards"]:
        block = d_out[r0 : r0 + nr, c0 : c0 + nc].reshape(nr, -1)
        count += int(np.sum(np.count_nonzero(block, axis=1) * 1000 >= block.shape[1] * 500))
    return count


@pytest.mark.parametrize(
    "geometry",
    [dict(in_shape=(3, 4, 4), kernel=4), dict(in_shape=(40, 1, 1), kernel=1)],
    ids=["window_is_the_map", "linear"],
)
@ON_DEVICES
def test_whole_window_input_gradient_by_runs_of_product_rows(geometry, device):
    spec = stage_spec(ROWS, out_channels=10, **geometry)
    x, weight, bias, d_out = make(spec, 11, True)
    d_out[list(SPARSE_ROWS)] = 0.0
    d_out[list(SPARSE_ROWS), 3] = 1.5  # one entry: the sparse path, never the product
    got = run(spec, x, weight, bias, d_out, **device)
    _, dw, db, dx, _ = reference_stage(spec, x, weight, bias, d_out)
    assert_close(got["grad_input"], dx, "dL/dx")
    assert_close(got["grad_weight"], dw, "dL/dW")
    assert_close(got["grad_bias"], db, "dL/db")
    want = expected_dense_rows(got["plan"], d_out)
    assert want >= ROWS - len(SPARSE_ROWS)  # each shard's full rows at least
    assert got["input_grad_dense_rows"] == want


@pytest.mark.parametrize("padding", [(0, 1), (1, 0)], ids=["col_rows", "window_runs"])
@pytest.mark.parametrize("density", [1.0, 0.1])
@pytest.mark.parametrize("tiles", [1, 6])
def test_folded_max_pool_backward_with_padding(padding, density, tiles):
    # A 2 x 2 max pool tiling a padded convolution's map (8 x 10 -> 4 x 5), so the pool's
    # backward is folded into the gradient vertices: the input gradient's entries listed from
    # the pool's gradient, into col rows and col2im (column padding) or window runs (rows).
    spec = stage_spec(6, in_shape=(3, 10, 8), out_channels=5, kernel=3, padding=padding)
    spec["pools"] = [{"kind": "max", "kernel_size": (2, 2), "stride": (2, 2), "padding": (0, 0)}]
    got = check_stage(spec, seed=13, grad_density=density, type="ipu-model", tiles_per_ipu=tiles)
    assert got["input_grad_dense_rows"] == 0  # at most 25% of dL/dI: never the product
