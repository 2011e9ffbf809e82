"""The event-driven forward and weight gradient by listed entries (codelets/ConvKernels.hpp,
combineListed): on wide vectors, with at least one vector of output channels, the entries that
the non-zero inputs reach are listed by output position (the forward) or by tap (the weight
gradient by inputs, which full dL/dI at 15% spikes takes) and combined in registers instead of
scattered with a store per multiply-add. Against the reference's ops in float64
(test_engine_conv.py's helpers) on both sides of the channel rule (8 channels: below AVX-512's
16 lanes, the scatter there; 16 and 20: the lists, 20 with a tail of lanes), with and without
the fused 2 x 2 max pool, at stride 2 with padding, on the cpu device (one worker a shard), the
ipu-model's one tile (six workers, each with a sixth of the work: a row's inputs listed in
several chunks) and six tiles (the channels split into groups of 8 or 10 for the pooled and
strided geometries: below one vector, the scatter). With the forward's lists alone, a build that
combined only each row's first chunk failed 7 of the cpu and six-tile cases (all cpu ones with
16 and 20 channels, one six-tile one), so the lists and their chunks are reached."""

from __future__ import annotations

import pytest
from test_engine_conv import check_stage, stage_spec

GEOMETRIES = {
    "pooled_like_csnn": dict(in_shape=(3, 12, 12), kernel=5, pools=[("max", 2, 2, 0)]),
    "no_pool": dict(in_shape=(3, 10, 10), kernel=3),
    "stride2_pad1": dict(in_shape=(2, 11, 9), kernel=3, stride=2, padding=1),
}


@pytest.mark.parametrize("geometry", sorted(GEOMETRIES))
@pytest.mark.parametrize("channels", [8, 16, 20])
@pytest.mark.parametrize(
    "device",
    [
        dict(type="cpu"),
        dict(type="ipu-model", tiles_per_ipu=1),
        dict(type="ipu-model", tiles_per_ipu=6),
    ],
    ids=["cpu", "ipu_model_1_tile", "ipu_model_6_tiles"],
)
def test_event_forward_by_positions_equals_the_reference(geometry, channels, device):
    spec = stage_spec(6, out_channels=channels, **GEOMETRIES[geometry])
    got = check_stage(spec, seed=5, spikes=True, **device)
    assert got["dense_rows"] == 0  # 15% spikes: the event path on every row
