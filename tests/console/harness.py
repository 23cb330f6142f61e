"""What the console's browser tests share: the token, the served console, screenshots."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

TOKEN = "console-test-token"
SHOTS = Path(__file__).resolve().parents[2] / ".screenshots" / "console"


@dataclass
class Console:
    url: str  # ends in /console
    store: Any
    demo_output: list[str]


def shoot(page: Any, name: str, *, full_page: bool = True) -> Path:
    """A screenshot under .screenshots/console/ (git-ignored), for a person to look at."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=full_page)
    return path
