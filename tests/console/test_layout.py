"""Every console page fits a 1280 px wide window: no horizontal scroll bar on a laptop screen."""

from __future__ import annotations

from typing import Any

from console.harness import Console, shoot

# The widest element that sticks out past the window, to name it when a page overflows.
_OVERFLOW = """() => {
  const width = document.documentElement.clientWidth;
  let widest = null;
  for (const el of document.querySelectorAll('body *')) {
    const right = el.getBoundingClientRect().right;
    if (right > width + 0.5 && (widest === null || right > widest.right)) {
      const text = (el.innerText || '').slice(0, 60);
      widest = {right, tag: el.tagName.toLowerCase(), cls: el.className, text};
    }
  }
  return {scroll: document.documentElement.scrollWidth, width, widest};
}"""


def _pages(console: Console) -> list[str]:
    """One page of each kind the console serves, over the demo's data."""
    trace, agent = console.store.query(
        "SELECT TraceId, Agent FROM trajectories FINAL WHERE Failure ORDER BY Start DESC LIMIT 1"
    )[0]
    rule = console.store.query("SELECT Rule FROM alert_history ORDER BY At LIMIT 1")
    pages = ["/runs", f"/runs/{trace}", "/agents", f"/agents/{agent}", "/drift", "/alerts", "/compare"]
    pages += ["/references", "/references/refund", "/references/new"]
    return pages + ([f"/alerts/{rule[0][0]}"] if rule else [])


def test_no_page_is_wider_than_a_1280_px_window(page: Any, console: Console) -> None:
    """At 1280 px, each page's document is no wider than the window (what would scroll sideways
    is named: tag, class and text of the element reaching furthest right)."""
    assert page.viewport_size["width"] == 1280
    too_wide = {}
    for path in _pages(console):
        page.goto(f"{console.url}{path}")
        found = page.evaluate(_OVERFLOW)
        shoot(page, "1280-" + path.strip("/").replace("/", "-")[:40], full_page=False)
        if found["scroll"] > found["width"]:
            too_wide[path] = found
    assert not too_wide, too_wide
