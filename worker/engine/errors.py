"""The one exception tree of detemplate.

    DetemplateError
     +-- BadInputError        a page or message that cannot be processed; expected,
     |                        carries a short machine `reason` and a human `detail`.
     |                        Shells turn it into a dead letter / error record.
     +-- StateError           the state store is unusable (corrupt, wrong version).
     +-- ConfigError          invalid parameters or settings.

Anything else is a bug and is allowed to crash loudly.
"""

from __future__ import annotations


class DetemplateError(Exception):
    """Base of every error detemplate raises on purpose."""


class BadInputError(DetemplateError):
    """A page or message that cannot be processed.

    reason: short stable code, e.g. ``not_html``, ``too_large``, ``too_deep``.
    detail: one human sentence saying what was wrong.
    """

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


class StateError(DetemplateError):
    """The state store is unusable (corrupt bytes, unknown format version)."""


class ConfigError(DetemplateError):
    """Invalid parameters or settings."""
