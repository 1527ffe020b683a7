"""Imported by the embedded cluster's fork server (:mod:`._forkserver`): load and run dpipe's pass kernels once, so that
every worker forked from it has them compiled (:func:`._memory.worker_memory` then only measures).

Then every object the imports made is moved out of the garbage collector's sight (:func:`gc.freeze`, meant for a
process that forks): a collection in a forked worker would otherwise walk them all, writing to every page the worker
shares with the fork server - measured, 0.4-0.65 s for the ``gc.collect()`` of :func:`._memory.worker_memory`, and as many
pages copied into each worker.

A failure here must not stop the fork server: the workers would load the kernels themselves, as spawned ones do.
"""

from __future__ import annotations

import gc

__all__: list[str] = []


def _warm() -> None:
    try:
        from ._memory import WARM_UP_FEATURES, _warm_up

        _warm_up(WARM_UP_FEATURES)
    except Exception:  # noqa: BLE001 - best effort, see the module docstring
        pass
    gc.collect()
    gc.freeze()


_warm()
