"""``make bench``: a tool of this repository (not part of the runtime package).

Run as ``python -m bench`` from the checkout. The checkout's own ``workflow/`` comes first on
``sys.path``, so the bench always measures this copy of ``cloudbench``, whatever is installed.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO / "workflow") not in sys.path:
    sys.path.insert(0, str(REPO / "workflow"))
