"""Peaks with kernel scratch: at each op, and as TVM's workspace pool holds it.

Two figures, from a planned graph's live profile and each op's scratch requests:

``peak_with_scratch``
    At each op, the bytes the plan keeps live plus that op's own scratch: what the
    step needs if scratch is freed when its kernel ends (an arena that places
    scratch like any tensor would reach this).
``pool_peak``
    What TVM's runtime holds today. Its workspace pool (``workspace_pool.cc``)
    rounds each request up to 4 KiB pages and keeps every block it has handed out:
    a request takes the smallest free block that fits; if none fits, the largest
    free block is given back and a new one of the requested size is taken; a freed
    block returns to the pool. Blocks survive between kernels and steps, so a large
    scratch early in a step stays allocated at the plan's peak. Two steps are
    simulated, the second starting with the pool the first left (training's steady
    state). Requests made once per thread (inside parallel loops) go to the worker
    threads' pools, modelled as ``threads`` pools that see the same requests.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Sequence

__all__ = ["PoolModel", "ScratchPeaks", "scratch_peaks"]


@dataclass
class PoolModel:
    """One thread's workspace pool: block sizes only (addresses do not matter here)."""

    free: list[int] = field(default_factory=list)       # sorted, smallest first
    allocated: list[int] = field(default_factory=list)  # a stack, as the runtime frees

    @property
    def held(self) -> int:
        return sum(self.free) + sum(self.allocated)

    def alloc(self, nbytes: int) -> None:
        if self.free and self.free[-1] >= nbytes:
            self.allocated.append(self.free.pop(bisect.bisect_left(self.free, nbytes)))
        else:
            if self.free:
                self.free.pop()  # the largest free block is given back and replaced
            self.allocated.append(nbytes)

    def release_all(self) -> None:
        """The kernel ends: its blocks return to the pool."""
        while self.allocated:
            bisect.insort(self.free, self.allocated.pop())


@dataclass
class ScratchPeaks:
    """Peaks (bytes) of one planned step with its kernels' scratch."""

    peak_bytes: int               #: the plan alone
    peak_with_scratch_bytes: int  #: at each op, live + that op's scratch
    pool_peak_bytes: int          #: live + what TVM's workspace pool holds
    scratch_bytes: int            #: the largest scratch of one op
    pool_bytes: int               #: what the pool holds after two steps


def scratch_peaks(live: Sequence[int], requests: Sequence[Sequence[tuple[int, bool]]],
                  threads: int = 1) -> ScratchPeaks:
    """Both peaks for a live profile and per-op requests ``(page-rounded bytes, per thread?)``.

    ``live[i]``: bytes the plan keeps live at op ``i`` (``Graph.live_profile`` with no
    workspace); ``requests[i]``: op ``i``'s kernel's workspace requests.
    """
    if len(live) != len(requests):
        raise ValueError(f"{len(live)} live-profile steps but {len(requests)} request lists")
    if threads < 1:
        raise ValueError(f"threads must be at least 1, got {threads}")
    own = [sum(b * (threads if per_thread else 1) for b, per_thread in reqs) for reqs in requests]
    main, worker = PoolModel(), PoolModel()
    pool_peak = max(live, default=0)
    for _step in range(2):
        for cur, reqs in zip(live, requests):
            for nbytes, per_thread in reqs:
                (worker if per_thread else main).alloc(nbytes)
            pool_peak = max(pool_peak, cur + main.held + threads * worker.held)
            main.release_all()
            worker.release_all()
    return ScratchPeaks(peak_bytes=max(live, default=0),
                        peak_with_scratch_bytes=max((c + o for c, o in zip(live, own)), default=0),
                        pool_peak_bytes=pool_peak, scratch_bytes=max(own, default=0),
                        pool_bytes=main.held + threads * worker.held)
