"""The package's source as trees, each file parsed once per test process: the checks that
read every module (tests/test_stages.py, tests/test_identity.py) share the parse."""

from __future__ import annotations

import ast
from functools import cache


@cache
def parsed(text: str) -> ast.Module:
    """The tree of a module's text (the checks only read it)."""
    return ast.parse(text)
