"""The bearer-token check shared by the OTLP receivers and the read API (HTTP and gRPC).

The configured `bearer_token` may hold several tokens separated by commas, so a token can be
rotated without a gap: serve accepts the new and the old one while clients move over, and this
machine's CLI sends the first (`sent_token`)."""

from __future__ import annotations

import hmac


def configured_tokens(token: str | None) -> list[str]:
    """The tokens `bearer_token` holds (comma-separated, blanks around each dropped)."""
    return [part.strip() for part in (token or "").split(",") if part.strip()]


def sent_token(token: str | None) -> str | None:
    """The token a client of this machine sends: the first configured one (None without one)."""
    tokens = configured_tokens(token)
    return tokens[0] if tokens else None


def token_ok(given: str, token: str | None) -> bool:
    """Whether `given` is one of the configured tokens; always True when none is configured.

    Every configured token is compared, in constant time, so timings tell neither the token nor
    which one matched. A setting of only commas accepts nothing (fails closed)."""
    if not token:
        return True
    matches = [
        hmac.compare_digest(given.encode(), candidate.encode()) for candidate in configured_tokens(token)
    ]
    return any(matches)


def bearer_ok(authorization_header: str | None, token: str | None) -> bool:
    """Whether `Authorization: <header>` carries `Bearer <t>` for a configured token `t`; always
    True when no token is set."""
    if not token:
        return True
    if authorization_header is None or not authorization_header.startswith("Bearer "):
        return False
    return token_ok(authorization_header[len("Bearer ") :], token)
