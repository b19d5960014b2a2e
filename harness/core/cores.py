"""How many cores this process may use, and how many other work keeps busy: the default thread count of scoring
(harness/backends/hf.py) and of training (trainers/loop.py)."""

from __future__ import annotations

import os
import time


def usable_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def cpu_times() -> tuple[int, int, int] | None:
    """(all jiffies, idle jiffies, CPUs counted) from /proc/stat's aggregate line; None where there is none."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    fields = [int(x) for x in lines[0].split()[1:]]
    cpus = sum(1 for ln in lines[1:] if ln.startswith("cpu"))
    return sum(fields[:8]), fields[3] + fields[4], cpus  # user..steal; idle + iowait


def busy_cores(window: float = 0.5) -> float | None:
    """How many cores other work keeps busy, measured over `window` seconds; None where /proc/stat is missing.

    The load average is not used where this exists: in containers and sandboxes it can count tasks that use no
    CPU (here it read 1.0-1.4 on an idle machine, which cost the idle 2-core run its second thread), and it
    lags a minute behind, so it still counts a job that just ended.
    """
    a = cpu_times()
    if a is None:
        return None
    time.sleep(window)
    b = cpu_times()
    if b is None or b[0] <= a[0]:
        return None
    busy = 1.0 - (b[1] - a[1]) / (b[0] - a[0])
    return max(0.0, busy) * a[2]


REMEASURE_AFTER = 60.0  # seconds a measurement stands: a run's plan and its build ask within moments of each other
_last: tuple[float, int] | None = None  # (time.monotonic() of the measurement, its thread count)


def default_threads() -> int:
    """Cores this process may use, minus the cores other work keeps busy now; at least 1. Measured at most once a
    minute (each measurement waits half a second, and one hf run asked twice)."""
    global _last
    now = time.monotonic()
    if _last is None or now - _last[0] > REMEASURE_AFTER:
        _last = (now, _measure_threads())
    return _last[1]


def _measure_threads() -> int:
    cores = usable_cores()
    busy = busy_cores()
    if busy is None:
        try:
            busy = os.getloadavg()[0]
        except OSError:
            busy = 0.0
    return max(1, min(cores, int(cores - busy + 0.5)))
