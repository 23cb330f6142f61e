"""The alert state machine with an injected clock: pending -> firing -> resolved, and what it notifies."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agenttrail.evaluators.monitoring.alerts.conditions import FailureRateSpike, Observation
from agenttrail.evaluators.monitoring.alerts.config import AlertRule, fingerprint
from agenttrail.evaluators.monitoring.alerts.machine import AlertBook, Change, State

GROUP = {"agent": "checkout"}


def rule(**overrides: object) -> AlertRule:
    settings: dict[str, object] = {
        "name": "spike",
        "condition": FailureRateSpike(),
        "for_s": 60.0,
        "repeat_interval_s": 600.0,
        "annotations": {"summary": "rate {value:.0%} for {agent}"},
    }
    settings.update(overrides)
    return AlertRule(**settings)  # type: ignore[arg-type]


def seen(active: bool, value: float = 0.5) -> list[Observation]:
    return [Observation(GROUP, value, 0.1, active, "detail")]


def step(book: AlertBook, r: AlertRule, active: bool | None, at: float) -> Change | None:
    """One evaluation at `at`; None for `active` means the group had no data."""
    changes = book.apply(r, [] if active is None else seen(active), at)
    assert len(changes) <= 1
    return changes[0] if changes else None


def test_pending_firing_resolved() -> None:
    """True -> pending; true for `for` -> firing (notify); false -> resolved (notify)."""
    book, r = AlertBook(), rule()
    first = step(book, r, True, 1000.0)
    assert first is not None
    assert first.transitions == ((State.INACTIVE, State.PENDING),)
    assert first.notify is None
    assert first.alert.annotations["summary"] == "rate 50% for checkout"
    still = step(book, r, True, 1030.0)
    assert still is not None
    assert (still.transitions, still.notify) == ((), None)
    fired = step(book, r, True, 1060.0)
    assert fired is not None
    assert fired.transitions == ((State.PENDING, State.FIRING),)
    assert fired.notify == "firing"
    assert (fired.alert.active_since, fired.alert.fired_at) == (1000.0, 1060.0)
    resolved = step(book, r, False, 1090.0)
    assert resolved is not None
    assert resolved.transitions == ((State.FIRING, State.RESOLVED),)
    assert resolved.notify == "resolved"
    assert resolved.alert.resolved_at == 1090.0
    assert book.active == {}


def test_pending_that_clears_goes_back_to_inactive_silently() -> None:
    """A condition that stops holding before `for` never notifies."""
    book, r = AlertBook(), rule()
    step(book, r, True, 0.0)
    cleared = step(book, r, False, 30.0)
    assert cleared is not None
    assert cleared.transitions == ((State.PENDING, State.INACTIVE),)
    assert cleared.notify is None
    assert step(book, r, False, 60.0) is None  # inactive and staying so: nothing recorded


def test_missing_data_resolves_a_firing_alert() -> None:
    """A firing group with no data in the window is resolved, with no value: its last one (above
    the threshold) beside "resolved" read as if the condition still held."""
    book, r = AlertBook(), rule(for_s=0.0)
    fired = step(book, r, True, 0.0)
    assert fired is not None
    assert fired.transitions == ((State.INACTIVE, State.PENDING), (State.PENDING, State.FIRING))
    gone = step(book, r, None, 30.0)
    assert gone is not None
    assert gone.alert.state is State.RESOLVED
    assert gone.alert.detail == "no data in the window"
    assert fired.alert.value is not None
    assert gone.alert.value is None
    # The summary says why it resolved, not the firing one unchanged.
    assert gone.alert.annotations["summary"] == (
        "Resolved for lack of data (no data in the window); it fired on: rate 50% for checkout"
    )


def test_a_drift_alert_without_events_resolves_as_no_longer_drifting() -> None:
    """A drift rule observes only groups with drift events: none in the window means the drift
    stopped, not that data is missing, and the resolved summary says so."""
    from agenttrail.evaluators.monitoring.alerts.conditions import DriftDetected

    book, r = AlertBook(), rule(for_s=0.0, condition=DriftDetected(window_s=60.0))
    step(book, r, True, 0.0)
    gone = step(book, r, None, 30.0)
    assert gone is not None
    assert gone.alert.state is State.RESOLVED
    assert gone.alert.detail == "no drift event in the window"
    assert gone.alert.annotations["summary"] == (
        "Resolved: no drift event in the window; it fired on: rate 50% for checkout"
    )


def test_too_few_runs_resolve_a_firing_alert_saying_so() -> None:
    """A firing group whose window now breaches on fewer runs than the rule's minimum resolves as
    for no data: no value, and a summary saying why instead of the template over a rate that does
    not count ("rate 90%" beside "resolved"). Clearing on enough runs keeps the template."""
    book, r = AlertBook(), rule(for_s=0.0)
    step(book, r, True, 0.0)
    few = Observation(GROUP, 0.9, 0.1, False, "9/10 runs failed; fewer than min_runs=20", too_few=True)
    [gone] = book.apply(r, [few], 30.0)
    assert gone.alert.state is State.RESOLVED
    assert gone.alert.value is None
    assert gone.alert.annotations["summary"] == (
        "Resolved for lack of data (9/10 runs failed; fewer than min_runs=20); "
        "it fired on: rate 50% for checkout"
    )
    step(book, r, True, 60.0)
    step(book, r, True, 60.0)
    cleared = step(book, r, False, 90.0)
    assert cleared is not None
    assert cleared.alert.state is State.RESOLVED
    assert cleared.alert.annotations["summary"] == "rate 50% for checkout"
    assert cleared.alert.value == 0.5


def test_repeat_interval_and_send_resolved() -> None:
    """While firing, one notification per repeat_interval; no resolve notification when disabled."""
    book, r = AlertBook(), rule(for_s=0.0, repeat_interval_s=100.0, send_resolved=False)
    notes = []
    for at in range(0, 260, 10):
        change = step(book, r, True, float(at))
        notes.append((at, change.notify if change else None))
    assert [(at, note) for at, note in notes if note] == [(0, "firing"), (100, "repeat"), (200, "repeat")]
    resolved = step(book, r, False, 300.0)
    assert resolved is not None
    assert resolved.alert.state is State.RESOLVED
    assert resolved.notify is None


def test_a_new_episode_after_resolution() -> None:
    """A resolved alert whose condition holds again goes through pending again, same fingerprint."""
    book, r = AlertBook(), rule(for_s=10.0)
    for at, active in ((0.0, True), (10.0, True), (20.0, False)):
        step(book, r, active, at)
    again = step(book, r, True, 30.0)
    assert again is not None
    assert again.transitions == ((State.INACTIVE, State.PENDING),)
    assert again.alert.fingerprint == fingerprint("spike", GROUP)
    assert again.alert.fired_at is None


def test_restored_alert_keeps_counting() -> None:
    """A book built from stored alerts continues them: firing stays firing without a new notification."""
    book, r = AlertBook(), rule(for_s=0.0)
    fired = step(book, r, True, 0.0)
    assert fired is not None
    restored = AlertBook([fired.alert])
    change = step(restored, r, True, 30.0)
    assert change is not None
    assert (change.transitions, change.notify) == ((), None)


def test_removed_rule_is_retired_without_notification() -> None:
    """Alerts of a rule no longer configured are resolved, silently."""
    book, r = AlertBook(), rule(for_s=0.0)
    step(book, r, True, 0.0)
    (retired,) = book.retire({}, 50.0)
    assert retired.alert.state is State.RESOLVED
    assert retired.notify is None
    assert book.active == {}


@given(
    st.lists(st.tuples(st.sampled_from([True, False, None]), st.integers(1, 120)), max_size=60),
    st.sampled_from([0.0, 30.0, 90.0]),
    st.sampled_from([50.0, 200.0]),
)
def test_notifications_follow_the_contract(
    steps: list[tuple[bool | None, int]], for_s: float, repeat_s: float
) -> None:
    """For any history: firing only after `for` of holding, never twice in an episode except as
    repeats spaced by repeat_interval, and a resolve only after a firing."""
    book, r = AlertBook(), rule(for_s=for_s, repeat_interval_s=repeat_s)
    now, held_since, last_sent = 0.0, None, None
    firing = False
    for active, gap in steps:
        now += gap
        change = step(book, r, active, now)
        held_since = (held_since if held_since is not None else now) if active else None
        note = change.notify if change else None
        if note == "firing":
            assert not firing
            assert held_since is not None
            assert now - held_since >= for_s
            firing, last_sent = True, now
        elif note == "repeat":
            assert firing
            assert last_sent is not None
            assert now - last_sent >= repeat_s
            last_sent = now
        elif note == "resolved":
            assert firing
            assert not active
            firing = False
        if firing and not active:
            raise AssertionError("a firing alert whose condition fails must resolve")
        state = book.active.get(fingerprint("spike", GROUP))
        assert (state is not None and state.state is State.FIRING) == firing
