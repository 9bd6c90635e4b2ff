"""The few threads the data steps use, in one place.

Two writer threads keep the page-cache copy of one on the second core while the other
computes (AES) or maps the next window; both modules that do this share these helpers.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


def run_workers(work: Callable[[int, threading.Event], None], workers: int, name: str) -> None:
    """Run ``work(i, failed)`` for i in 0..workers-1, worker 0 in the caller's thread.

    ``failed`` is set as soon as one worker raises, so the others can stop early; the first
    error is raised here, in the caller's thread, once every worker has returned.
    """
    errors: list[BaseException] = []
    failed = threading.Event()

    def guarded(index: int) -> None:
        try:
            work(index, failed)
        except BaseException as err:  # re-raised below, in the caller's thread
            errors.append(err)
            failed.set()

    threads = [
        threading.Thread(target=guarded, args=(i,), name=f"{name}-{i}") for i in range(1, workers)
    ]
    for t in threads:
        t.start()
    guarded(0)
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
