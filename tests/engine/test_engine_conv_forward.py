"""The event-driven forward and the weight gradient by inputs (codelets/ConvKernels.hpp:
scatterRow, weightGradByInputs) at channel counts of one and more AVX-512 vectors, which the
other conv tests (at most 8 output channels) do not reach: 8, 16 and 20 output channels (20: a
kernel row's run of kW x c floats that ends inside a vector), with and without the fused 2 x 2
max pool, at stride 2 with padding; against the reference's ops in float64
(test_engine_conv.py's helpers) on the cpu device (one worker a shard), the ipu-model's one tile
(six workers, each with its rows and a sixth of the work) and six tiles (channel groups of 8 or
10 for the pooled and strided geometries). Spikes at 15% and full dL/dI: the event path on every
row and the weight gradient by inputs. (A version of both kernels that listed each output
position's or tap's entries and combined them in registers passed these and was bit-identical on
the CSNN, but not faster: docs/performance/csnn.md, sixth pass.)"""

from __future__ import annotations

import pytest
from test_engine_conv import ON_DEVICES, check_stage, stage_spec

GEOMETRIES = {
    "pooled_like_csnn": dict(in_shape=(3, 12, 12), kernel=5, pools=[("max", 2, 2, 0)]),
    "no_pool": dict(in_shape=(3, 10, 10), kernel=3),
    "stride2_pad1": dict(in_shape=(2, 11, 9), kernel=3, stride=2, padding=1),
}


@pytest.mark.parametrize("geometry", sorted(GEOMETRIES))
@pytest.mark.parametrize("channels", [8, 16, 20])
@ON_DEVICES
def test_event_forward_and_weight_gradient_at_wide_channel_counts(geometry, channels, device):
    spec = stage_spec(6, out_channels=channels, **GEOMETRIES[geometry])
    got = check_stage(spec, seed=5, spikes=True, **device)
    assert got["dense_rows"] == 0  # 15% spikes: the event path on every row
