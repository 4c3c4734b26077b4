"""The stream benchmark (filled in below)."""

from __future__ import annotations

from typing import Any


def register(subparsers: Any) -> None:
    pass
