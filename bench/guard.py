"""A cap on a bench's resident memory, so a run that grows past it cannot take the machine down.

``cap_rss(gib)`` starts a thread that reads the process's resident set every 0.2 s and ends the
process (exit status 3, one line on stderr) once it passes the cap; ``peak_rss_gib`` is the
kernel's high-water mark of it.
"""

from __future__ import annotations

import os
import resource
import sys
import threading
import time

_PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_gib() -> float:
    """Resident memory now, GiB."""
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * _PAGE / 2**30


def peak_rss_gib() -> float:
    """The highest resident memory of this process so far, GiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def cap_rss(gib: float) -> None:
    """End this process once its resident memory passes ``gib``."""

    def watch() -> None:
        while True:
            now = rss_gib()
            if now > gib:
                sys.stderr.write(f"memory guard: resident {now:.1f} GiB passed the cap of {gib:.1f} GiB\n")
                sys.stderr.flush()
                os._exit(3)
            time.sleep(0.2)

    threading.Thread(target=watch, name="rss-guard", daemon=True).start()
