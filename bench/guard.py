"""A cap on a bench's resident memory, so a run that grows past it cannot take the machine down.

``cap_rss(gib)`` starts a thread that reads the process's resident set every 0.2 s and ends the
process (exit status 3, one line on stderr) once it passes the cap; ``peak_rss_gib`` is the
kernel's high-water mark of it. A run that maps files (``--spill-dir``, p2pnode/transport/
spill.py) has file pages in its resident set, which the kernel writes out or drops as memory runs
short: ``cap_rss(gib, anonymous=True)`` caps, and ``track_peak_anonymous`` samples, the rest.
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


def anonymous_gib() -> float:
    """Resident memory less its file pages (statm's shared: pages the kernel can drop or write
    out to their files), GiB."""
    with open("/proc/self/statm") as fh:
        fields = fh.read().split()
    return (int(fields[1]) - int(fields[2])) * _PAGE / 2**30


def track_peak_anonymous(every: float = 0.05) -> list[float]:
    """A one-item list that a thread keeps at the highest :func:`anonymous_gib` seen so far
    (sampled every ``every`` s: a peak between two samples can be missed)."""
    peak = [anonymous_gib()]

    def watch() -> None:
        while True:
            peak[0] = max(peak[0], anonymous_gib())
            time.sleep(every)

    threading.Thread(target=watch, name="anonymous-peak", daemon=True).start()
    return peak


def peak_rss_gib() -> float:
    """The highest resident memory of this process so far, GiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def cap_rss(gib: float, anonymous: bool = False) -> None:
    """End this process once its resident memory (``anonymous``: less its file pages) passes ``gib``."""
    what = "anonymous" if anonymous else "resident"
    measure = anonymous_gib if anonymous else rss_gib

    def watch() -> None:
        while True:
            now = measure()
            if now > gib:
                sys.stderr.write(f"memory guard: {what} {now:.1f} GiB passed the cap of {gib:.1f} GiB\n")
                sys.stderr.flush()
                os._exit(3)
            time.sleep(0.2)

    threading.Thread(target=watch, name="rss-guard", daemon=True).start()
