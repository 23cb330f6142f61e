"""The bearer-token check shared by the OTLP receivers and the read API (HTTP and gRPC)."""

from __future__ import annotations

import hmac


def bearer_ok(authorization_header: str | None, token: str | None) -> bool:
    """Whether `Authorization: <header>` carries `Bearer <token>`; always True when no token is set.

    The comparison is constant-time so a caller cannot find the token byte by byte from timings.
    """
    if not token:
        return True
    if authorization_header is None:
        return False
    return hmac.compare_digest(authorization_header.encode(), f"Bearer {token}".encode())
