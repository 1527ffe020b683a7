"""One log line when numba compiles dpipe's kernels in this process (the first run after an install; later runs load
them from numba's cache), and the seconds spent compiling, so that timings can leave them out.

:func:`watch_compiles` registers a listener of numba's ``numba:compile`` event (numba fires it for a real compile, not
for a load from the cache); the ``dpipe`` command installs it.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

__all__ = ["watch_compiles", "compile_seconds", "COMPILE_ESTIMATE", "COMPILE_ESTIMATE_WITH_PARSER"]

log = logging.getLogger("dpipe")

#: what the first a9a train's compiles took on a 2-core machine, in seconds (said by the log line): 6 kernels in 0.99 s
#: (2026-12-07, load 3.4; ``python bench/first_run.py --kernels STORE`` lists them)
COMPILE_ESTIMATE = 1
#: the same when the run first reads a svmlight file (``dpipe train a9a.svm``: the parser's kernel, 1.4-1.6 s, then the
#: fit's; 2.5 s in all, 2026-12-08, the other processes frozen); said when the first kernel compiled is the parser's
COMPILE_ESTIMATE_WITH_PARSER = 3
_PARSER_MODULE = "dpipe.io._svmlight"
_state: dict[str, Any] = {"listener": None, "said": False, "seconds": 0.0, "depth": 0, "start": 0.0}
_lock = threading.Lock()


def compile_seconds() -> float:
    """Seconds this process has spent compiling dpipe's kernels since :func:`watch_compiles`."""
    return float(_state["seconds"])


def watch_compiles() -> None:
    """Log ``compiling dpipe's kernels once ...`` at the first compile of a dpipe kernel in this process and count the
    seconds compiles take (:func:`compile_seconds`); idempotent."""
    if _state["listener"] is not None:
        return
    from numba.core import event

    class _Listener(event.Listener):
        def on_start(self, ev: Any) -> None:
            dispatcher = (ev.data or {}).get("dispatcher")
            module = getattr(getattr(dispatcher, "py_func", None), "__module__", "") or ""
            if not module.startswith("dpipe"):
                return
            with _lock:
                if not _state["said"]:
                    _state["said"] = True
                    about = COMPILE_ESTIMATE_WITH_PARSER if module == _PARSER_MODULE else COMPILE_ESTIMATE
                    log.info("compiling dpipe's kernels once, about %d s (numba; later runs load them from its cache)", about)
                if _state["depth"] == 0:
                    _state["start"] = time.perf_counter()
                _state["depth"] += 1

        def on_end(self, ev: Any) -> None:
            dispatcher = (ev.data or {}).get("dispatcher")
            module = getattr(getattr(dispatcher, "py_func", None), "__module__", "") or ""
            if not module.startswith("dpipe"):
                return
            with _lock:
                _state["depth"] = max(0, _state["depth"] - 1)
                if _state["depth"] == 0:
                    _state["seconds"] += time.perf_counter() - _state["start"]

    _state["listener"] = _Listener()
    event.register("numba:compile", _state["listener"])
