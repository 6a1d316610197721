"""Watch streams of nodes and pods for the :class:`~gangplace.k8s.Controller` (rule K12).

A :class:`Watcher` is one thread that watches one kind from a ``resourceVersion`` and puts
every event on the controller's queue, tagged with its generation. It asks for bookmarks
(``allowWatchBookmarks``) and moves its version forward on each, so that a watch restarted
after a timeout or a dropped connection resumes where the last one stopped and the server
rarely has to answer 410. A 410 Gone (the version was compacted away) is put on the queue
as ``("gone", kind)`` and ends the thread: the controller lists both kinds again (one
relist) and starts new watchers from the list's version, and events of an older generation
still queued are dropped. Any other failure is retried from the last version after a short
pause, and reported on the queue as a warning.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["Event", "Watcher"]

# (generation, kind, event type, the object as a dict); event type "gone" or "warning"
# carries no object (a warning carries its text).
Event = tuple[int, str, str, Any]
RETRY_PAUSE = 0.5  # seconds before a failed watch is started again


class Watcher(threading.Thread):
    """One kind's watch, from ``version``, feeding ``events``.

    Args:
        kind: ``"node"`` or ``"pod"``.
        list_call: The client's list method (``CoreV1Api.list_node``,
            ``list_pod_for_all_namespaces``), called with ``watch=True``.
        version: The list's ``resourceVersion`` to start from.
        generation: Tags every event (the controller drops older generations).
        events: The controller's queue.
        timeout_seconds: Each watch request's server-side timeout; then it is started again.

    """

    def __init__(
        self,
        kind: str,
        list_call: Callable[..., Any],
        version: str,
        generation: int,
        events: queue.Queue[Event],
        timeout_seconds: int,
    ) -> None:
        super().__init__(name=f"gangplace-watch-{kind}", daemon=True)
        self.kind = kind
        self.list_call = list_call
        self.version = version
        self.generation = generation
        self.events = events
        self.timeout_seconds = timeout_seconds
        self.stopping = threading.Event()
        self.restarts = 0  # watch requests after the first (timeouts, failures)

    def stop(self) -> None:
        """Ends the thread after its current request (at most ``timeout_seconds``)."""
        self.stopping.set()

    def run(self) -> None:
        """Watches until stopped or gone (410); failures are warnings, then retried."""
        while not self.stopping.is_set():
            try:
                if self._watch_once():
                    return
            except Exception as error:  # the API's answer or the connection's: never raised
                if getattr(error, "status", None) == 410:
                    self.events.put((self.generation, self.kind, "gone", None))
                    return
                text = f"watch of {self.kind}s failed ({type(error).__name__}: {error}); resumed"
                self.events.put((self.generation, self.kind, "warning", text))
                self.stopping.wait(RETRY_PAUSE)
            self.restarts += 1

    def _watch_once(self) -> bool:
        """One watch request, read to its end; ``True`` when the version is gone (410).

        The stream is read line by line as JSON (the client's ``Watch`` is not used: it
        cannot report a 410 without deserializing every object into a model).
        """
        from kubernetes.watch.watch import iter_resp_lines

        response = self.list_call(
            watch=True,
            resource_version=self.version,
            allow_watch_bookmarks=True,
            timeout_seconds=self.timeout_seconds,
            _preload_content=False,
        )
        try:
            lines: Iterator[str] = iter_resp_lines(response)  # type: ignore[no-untyped-call]
            for line in lines:
                if self.stopping.is_set():
                    return False
                if not line or line.isspace():
                    continue
                try:
                    event = json.loads(line)
                except ValueError:
                    text = f"watch of {self.kind}s: a line that is not JSON ignored: {line:.80}"
                    self.events.put((self.generation, self.kind, "warning", text))
                    continue
                if self._gone(event):
                    self.events.put((self.generation, self.kind, "gone", None))
                    return True
                self._put(event)
        finally:
            response.close()
            response.release_conn()
        return False

    def _gone(self, event: Any) -> bool:
        """Whether the event is the server's 410 Gone (other errors are warnings)."""
        if not isinstance(event, dict) or event.get("type") != "ERROR":
            return False
        status = event.get("object")
        code = status.get("code") if isinstance(status, dict) else None
        if code == 410:
            return True
        message = status.get("message") if isinstance(status, dict) else status
        text = f"watch of {self.kind}s: the server sent an error ({code}: {message})"
        self.events.put((self.generation, self.kind, "warning", text))
        return False

    def _put(self, event: Any) -> None:
        kind = event.get("type") if isinstance(event, dict) else None
        obj = event.get("object") if isinstance(event, dict) else None
        metadata = obj.get("metadata") if isinstance(obj, dict) else None
        version = metadata.get("resourceVersion") if isinstance(metadata, dict) else None
        if isinstance(version, str) and version:
            self.version = version  # also from a BOOKMARK, which carries nothing else
        if kind in ("ADDED", "MODIFIED", "DELETED"):
            self.events.put((self.generation, self.kind, kind, obj))
        elif kind != "BOOKMARK":
            text = f"watch of {self.kind}s: an event of type {kind!r} ignored"
            self.events.put((self.generation, self.kind, "warning", text))


def wait_for_queue(events: queue.Queue[Event], timeout: float) -> Event | None:
    """The next event, waiting up to ``timeout`` seconds (``None``: none came)."""
    try:
        return events.get(timeout=timeout) if timeout > 0 else events.get_nowait()
    except queue.Empty:
        return None


def monotonic() -> float:
    return time.monotonic()
