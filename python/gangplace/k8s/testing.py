"""A Kubernetes API server for tests, on 127.0.0.1: nodes, pods, watches and bindings.

Used by the test command (``tests/test_k8s_controller.py``) and the example of
docs/kubernetes.md (K12); a user may test a controller setup against it the same way.

What the real ``kubernetes`` client needs of ``/api/v1`` and no more: lists with a
``resourceVersion``; watches streamed as chunked JSON lines from a version, with BOOKMARK
events when asked and ``timeoutSeconds`` honoured; a version older than the last compaction
answered with an ERROR event of code 410 (as the API server does); merge patches of pods;
bindings answered 201, or a scripted 409/500 per pod; deletes. Every change takes the next
``resourceVersion`` and is logged for the watches.
"""

from __future__ import annotations

import copy
import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

__all__ = ["FakeApiServer"]


class FakeApiServer:
    """The server's state and its HTTP front, started on a free loopback port."""

    def __init__(self) -> None:
        self.version = 1
        self.nodes: dict[str, dict[str, Any]] = {}
        self.pods: dict[tuple[str, str], dict[str, Any]] = {}
        self.log: list[tuple[int, str, str, dict[str, Any]]] = []  # (version, kind, type, obj)
        self.compacted = 0  # watches from a version below this get 410
        self.binding_replies: dict[str, list[int]] = {}  # pod name -> scripted HTTP codes
        self.watch_versions: list[tuple[str, str]] = []  # (kind, resourceVersion) requested
        self.bookmarks = True
        self.changed = threading.Condition()
        self.http = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.http.daemon_threads = True
        self.thread = threading.Thread(target=self.http.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``, for ``kubernetes.client.Configuration(host=...)``."""
        host, port = self.http.server_address[:2]
        return f"http://{host!s}:{port}"

    def close(self) -> None:
        """Stops serving (watch streams end with their connections)."""
        self.http.shutdown()
        self.http.server_close()

    # ------------------------------------------------------------------ changes

    def put(self, kind: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Adds or replaces a node or pod (ADDED or MODIFIED)."""
        with self.changed:
            meta = obj.setdefault("metadata", {})
            meta.setdefault("uid", str(uuid.uuid4()))
            meta.setdefault("namespace", "default") if kind == "pod" else None
            store, key = self._where(kind, obj)
            event = "MODIFIED" if key in store else "ADDED"
            store[key] = obj
            self._log(kind, event, obj)
            return obj

    def delete(self, kind: str, obj: dict[str, Any]) -> None:
        """Removes a node or pod (DELETED)."""
        with self.changed:
            store, key = self._where(kind, obj)
            gone = store.pop(key)
            self._log(kind, "DELETED", gone)

    def compact(self) -> None:
        """Forgets every event so far: older watches get 410 Gone."""
        with self.changed:
            self.compacted = self.version

    def _where(self, kind: str, obj: dict[str, Any]) -> tuple[dict[Any, Any], Any]:
        meta = obj["metadata"]
        if kind == "node":
            return self.nodes, meta["name"]
        return self.pods, (meta["namespace"], meta["name"])

    def _log(self, kind: str, event: str, obj: dict[str, Any]) -> None:
        self.version += 1
        obj["metadata"]["resourceVersion"] = str(self.version)
        self.log.append((self.version, kind, event, copy.deepcopy(obj)))
        self.changed.notify_all()


def _handler(server: FakeApiServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:  # quiet
            pass

        def do_GET(self) -> None:
            url = urlparse(self.path)
            query = {k: v[0] for k, v in parse_qs(url.query).items()}
            parts = url.path.strip("/").split("/")
            if url.path in ("/api/v1/nodes", "/api/v1/pods"):
                kind = "node" if parts[-1] == "nodes" else "pod"
                if query.get("watch") in ("true", "1", "True"):
                    return self._watch(kind, query)
                return self._list(kind)
            if len(parts) == 6 and parts[4] == "pods":
                pod = server.pods.get((parts[3], parts[5]))
                return self._reply(200, pod) if pod else self._status(404, "NotFound")
            return self._status(404, "NotFound")

        def do_PATCH(self) -> None:
            parts = urlparse(self.path).path.strip("/").split("/")
            patch = self._body()
            with server.changed:
                pod = server.pods.get((parts[3], parts[5]))
                if pod is None:
                    return self._status(404, "NotFound")
                annotations = pod["metadata"].setdefault("annotations", {})
                for key, value in patch.get("metadata", {}).get("annotations", {}).items():
                    if value is None:
                        annotations.pop(key, None)
                    else:
                        annotations[key] = value
                server.put("pod", pod)
                return self._reply(200, pod)

        def do_POST(self) -> None:
            parts = urlparse(self.path).path.strip("/").split("/")
            body = self._body()
            # POST /api/v1/namespaces/{ns}/bindings (the name in the body), as
            # CoreV1Api.create_namespaced_binding sends it, or .../pods/{name}/binding.
            if parts[-1] == "bindings" and len(parts) == 5:
                name = body.get("metadata", {}).get("name", "")
            elif parts[-1] == "binding" and len(parts) == 7:
                name = parts[5]
            else:
                return self._status(404, "NotFound")
            with server.changed:
                pod = server.pods.get((parts[3], name))
                if pod is None:
                    return self._status(404, "NotFound")
                script = server.binding_replies.get(name)
                code = script.pop(0) if script else 201
                if code == 201 and pod["spec"].get("nodeName"):
                    code = 409
                if code != 201:
                    reason = "Conflict" if code == 409 else "InternalError"
                    return self._status(code, reason)
                pod["spec"]["nodeName"] = body["target"]["name"]
                server.put("pod", pod)
            return self._status(201, "Created", status="Success")

        def do_DELETE(self) -> None:
            parts = urlparse(self.path).path.strip("/").split("/")
            with server.changed:
                pod = server.pods.get((parts[3], parts[5]))
                if pod is None:
                    return self._status(404, "NotFound")
                server.delete("pod", pod)
            return self._reply(200, pod)

        # -------------------------------------------------------------- replies

        def _list(self, kind: str) -> None:
            with server.changed:
                store = server.nodes if kind == "node" else server.pods
                items = [copy.deepcopy(obj) for obj in store.values()]
                version = str(server.version)
            title = "NodeList" if kind == "node" else "PodList"
            self._reply(
                200,
                {
                    "kind": title,
                    "apiVersion": "v1",
                    "metadata": {"resourceVersion": version},
                    "items": items,
                },
            )

        def _watch(self, kind: str, query: dict[str, str]) -> None:
            start = int(query.get("resourceVersion") or 0)
            server.watch_versions.append((kind, str(start)))
            deadline = time.monotonic() + float(query.get("timeoutSeconds") or 5)
            bookmarks = query.get("allowWatchBookmarks") in ("true", "True") and server.bookmarks
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            if start < server.compacted:
                gone = {
                    "kind": "Status",
                    "code": 410,
                    "reason": "Expired",
                    "message": f"too old resource version: {start} ({server.compacted})",
                }
                self._chunk({"type": "ERROR", "object": gone})
                return self._end()
            seen = start
            while time.monotonic() < deadline:
                with server.changed:
                    fresh = [e for e in server.log if e[0] > seen]
                    if not fresh:
                        server.changed.wait(min(0.2, max(0.0, deadline - time.monotonic())))
                        continue
                    seen = fresh[-1][0]
                mine = [e for e in fresh if e[1] == kind]
                for _, _, event, obj in mine:
                    self._chunk({"type": event, "object": obj})
                if bookmarks and len(mine) < len(fresh):
                    mark = {
                        "kind": "Node" if kind == "node" else "Pod",
                        "metadata": {"resourceVersion": str(seen)},
                    }
                    self._chunk({"type": "BOOKMARK", "object": mark})
            self._end()

        def _chunk(self, event: dict[str, Any]) -> None:
            data = (json.dumps(event) + "\n").encode()
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        def _end(self) -> None:
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

        def _body(self) -> dict[str, Any]:
            length = int(self.headers.get("Content-Length") or 0)
            data: dict[str, Any] = json.loads(self.rfile.read(length) or b"{}")
            return data

        def _reply(self, code: int, obj: Any) -> None:
            data = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _status(self, code: int, reason: str, status: str = "Failure") -> None:
            self._reply(
                code,
                {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "status": status,
                    "code": code,
                    "reason": reason,
                    "message": f"{reason} (answered by the test server)",
                },
            )

    return Handler
