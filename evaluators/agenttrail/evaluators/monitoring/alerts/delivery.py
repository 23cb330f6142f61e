"""Delivering notifications: one supervised thread and one bounded queue per channel.

The evaluator only enqueues (constant time, never blocks); each channel's thread sends with a
timeout per attempt and retries with exponential backoff up to `max_attempts`. A slow or failing
channel therefore delays only its own notifications, and never rule evaluation. Every attempt's
outcome is recorded in `alert_history` (`delivered`, `retrying`, `failed`); a notification that
finds its channel's queue full is `dropped` and counted. Queued notifications live in memory:
a restart loses them (the alert state is persisted, so a firing alert re-notifies after its
repeat interval). A reload (`Dispatcher.reconfigure`) keeps the sender, and so the queue, of
every channel still configured; an edited channel's queued notifications go where it now points.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from agenttrail.collector.background import BackgroundLoop
from agenttrail.evaluators.monitoring.alerts.channels import DeliveryError, send
from agenttrail.evaluators.monitoring.alerts.config import ChannelConfig
from agenttrail.evaluators.monitoring.alerts.history import HistoryEvent, Recorder
from agenttrail.evaluators.monitoring.alerts.machine import AlertInstance
from agenttrail.evaluators.monitoring.alerts.notify import Notification

log = logging.getLogger(__name__)


@dataclass(order=True, slots=True)
class _Job:
    due: float
    seq: int
    notification: Notification = field(compare=False)
    alert: AlertInstance = field(compare=False)
    attempt: int = field(default=0, compare=False)


@dataclass
class ChannelCounters:
    delivered: int = 0
    failed: int = 0  # notifications given up on after their last attempt
    retried: int = 0
    dropped: int = 0  # refused because the queue was full
    errors: int = 0  # failed cycles (bugs), not failed deliveries


class ChannelSender(BackgroundLoop):
    """Sends one channel's notifications in order of due time, retrying with backoff."""

    def __init__(
        self,
        channel: ChannelConfig,
        recorder: Recorder,
        *,
        queue_size: int = 1000,
        sender: Callable[[ChannelConfig, Notification], None] = send,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(
            what=f"alert channel {channel.name}",
            thread_name=f"agenttrail-alerts-{channel.name}",
            poll_interval_s=5.0,
        )
        self.name = f"alerts-{channel.name}"
        self.channel = channel
        self.counters = ChannelCounters()
        self._recorder = recorder
        self._send = sender
        self._clock = clock  # for history times, so they agree with the evaluator's
        self._queue_size = queue_size
        self._heap: list[_Job] = []
        self._lock = threading.Lock()
        self._seq = itertools.count()

    @property
    def queued(self) -> int:
        with self._lock:
            return len(self._heap)

    def submit(self, notification: Notification, alert: AlertInstance) -> bool:
        """Queue a notification (never blocks); False if the queue is full and it was dropped."""
        with self._lock:
            if len(self._heap) >= self._queue_size:
                self.counters.dropped += 1
                return False
            heapq.heappush(self._heap, _Job(time.monotonic(), next(self._seq), notification, alert))
        self.wake()
        return True

    def retarget(self, channel: ChannelConfig, queue_size: int) -> None:
        """Send what is queued, and what comes, with the reloaded `channel` (same name)."""
        with self._lock:
            self.channel, self._queue_size = channel, queue_size

    def count_failure(self, message: str) -> None:
        self.counters.errors += 1

    def cycle(self) -> None:
        """Send every due notification; wait for retries that fall due soon, return when idle."""
        while not self._stop.is_set():
            with self._lock:
                if not self._heap:
                    return
                wait = self._heap[0].due - time.monotonic()
                job = heapq.heappop(self._heap) if wait <= 0 else None
            if job is None:
                self._wake.wait(min(wait, self._poll_interval_s))
                self._wake.clear()
                continue
            self._attempt(job)

    def _attempt(self, job: _Job) -> None:
        with self._lock:
            channel = self.channel
        job.attempt += 1
        try:
            self._send(channel, job.notification)
        except DeliveryError as exc:
            last = job.attempt >= channel.max_attempts or not exc.retry
            outcome = "failed" if last else "retrying"
            self._record(job, outcome, str(exc))
            if last:
                self.counters.failed += 1
                log.error(
                    "alert %s for %s not delivered to channel %s after %d attempt(s): %s",
                    job.notification.kind,
                    job.notification.rule,
                    channel.name,
                    job.attempt,
                    exc,
                )
                return
            self.counters.retried += 1
            delay = min(channel.backoff_s * 2 ** (job.attempt - 1), channel.max_backoff_s)
            job.due = time.monotonic() + delay
            with self._lock:
                heapq.heappush(self._heap, job)
            return
        self.counters.delivered += 1
        if job.notification.kind != "refresh":  # keep-alives are recorded only when they fail
            self._record(job, "delivered", "")

    def _record(self, job: _Job, outcome: str, error: str) -> None:
        self._recorder.record(
            [
                HistoryEvent(
                    self._clock(),
                    job.alert,
                    "delivery",
                    notification=job.notification.kind,
                    channel=self.channel.name,
                    delivery=outcome,
                    attempt=job.attempt,
                    error=error[:1000],
                )
            ]
        )


class Dispatcher:
    """The channel senders of one evaluator: routes each notification to the rule's channels."""

    def __init__(
        self,
        channels: Mapping[str, ChannelConfig],
        recorder: Recorder,
        *,
        queue_size: int = 1000,
        sender: Callable[[ChannelConfig, Notification], None] = send,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._recorder, self._sender, self._clock = recorder, sender, clock
        self._started = False
        self.senders = {name: self._new_sender(channel, queue_size) for name, channel in channels.items()}

    def _new_sender(self, channel: ChannelConfig, queue_size: int) -> ChannelSender:
        return ChannelSender(
            channel, self._recorder, queue_size=queue_size, sender=self._sender, clock=self._clock
        )

    def reconfigure(self, channels: Mapping[str, ChannelConfig], queue_size: int) -> None:
        """Take a reloaded `channels:` section: a channel kept by name keeps its sender and queue
        (retargeted if edited), a new one gets a sender, a removed one's sender stops and what
        it still held is dropped, logged. Called on the evaluator's thread, which alone submits."""
        senders: dict[str, ChannelSender] = {}
        for name, channel in channels.items():
            kept = self.senders.get(name)
            if kept is None:
                kept = self._new_sender(channel, queue_size)
                if self._started:
                    kept.start()
            else:
                kept.retarget(channel, queue_size)
            senders[name] = kept
        removed = [sender for name, sender in self.senders.items() if name not in channels]
        self.senders = senders  # one assignment: health checks read it from other threads
        for sender in removed:
            sender.stop()
            if sender.queued:
                log.warning(
                    "alert channel %s was removed by a reload: %d queued notification(s) dropped",
                    sender.channel.name,
                    sender.queued,
                )

    def submit(
        self, notification: Notification, alert: AlertInstance, channels: Iterable[str]
    ) -> list[HistoryEvent]:
        """Queue on each channel; returns the `notification` history rows (queued or dropped)."""
        events = []
        for name in channels:
            queued = self.senders[name].submit(notification, alert)
            if not queued:
                log.error(
                    "alert channel %s queue is full: dropped a %s notification", name, notification.kind
                )
            events.append(
                HistoryEvent(
                    notification.at,
                    alert,
                    "notification",
                    notification=notification.kind,
                    channel=name,
                    delivery="queued" if queued else "dropped",
                    error="" if queued else "the channel's queue is full",
                )
            )
        return events

    def start(self) -> None:
        self._started = True
        for sender in self.senders.values():
            sender.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        for sender in self.senders.values():
            sender.stop(timeout_s)

    def dead(self) -> list[str]:
        return [sender.name for sender in self.senders.values() if not sender.alive()]
