"""Internal errors: instrumentation must never break the agent it observes."""

import logging
import os
from typing import Final

logger: Final = logging.getLogger("agenttrail.instrumentation")

RAISE_ENV: Final = "AGENTTRAIL_RAISE_INTERNAL_ERRORS"
# Bounds the memory of which places already logged; past it, new places stay silent.
_MAX_PLACES: Final = 1024
_logged: set[str] = set()


def internal_error(where: str, exc: Exception) -> None:
    """Log a bug of ours once per place (a decorated function or span name) and carry on.

    With ``AGENTTRAIL_RAISE_INTERNAL_ERRORS=1`` the error is raised instead, so tests see it.
    """
    if os.environ.get(RAISE_ENV) == "1":
        raise exc
    if where in _logged or len(_logged) >= _MAX_PLACES:
        return
    _logged.add(where)
    logger.error(
        "agenttrail: internal error instrumenting %s; the call itself is unaffected "
        "(further errors here are not logged)",
        where,
        exc_info=exc,
    )
