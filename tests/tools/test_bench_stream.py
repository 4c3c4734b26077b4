"""detemplate bench-stream's worker-against-offline ratio at the engine's speed inside the worker."""

from __future__ import annotations

import math

from detemplate.tools.bench_stream import same_speed_ratio


def test_the_same_speed_ratio_does_not_move_with_the_machines_speed_between_the_passes() -> None:
    # The worker: 1.30 ms a page of engine and 0.55 of its own; offline: the engine and 0.05 ms of encoding.
    worker, worker_decide = 1.85, 1.30
    for offline_speed in (1.0, 0.8, 1.3):  # the offline pass on a machine 20% slower, 30% faster
        offline_decide = 1.30 * offline_speed
        offline = offline_decide + 0.05 * offline_speed
        plain = offline / worker
        same = same_speed_ratio(worker, worker_decide, offline, offline_decide)
        assert math.isclose(same, (1.30 + 0.05 * offline_speed) / 1.85)
        assert abs(same - 1.35 / 1.85) < 0.01  # 0.73x whatever the offline pass's speed
        if offline_speed != 1.0:
            assert abs(plain - 1.35 / 1.85) > 0.1  # the plain ratio moves with it
    # A worker whose own cost a page is offline's (the encoding) runs at offline's rate.
    assert math.isclose(same_speed_ratio(1.35, 1.30, 1.35, 1.30), 1.0)
    assert math.isnan(same_speed_ratio(0.0, 0.0, 1.0, 1.0))
