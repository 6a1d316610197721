"""Binding through the pinned ``kubernetes`` client against a stand-in API server (issue 24,
part 3; docs/kubernetes.md "Binding pods").

The server listens on 127.0.0.1 on a free port, records every request (method, path, content
type, JSON body) and answers as the API server does: ``200`` with the pod for a patch,
``201`` with a ``Status`` body for a binding, or the error a test sets for a path (``404``,
``409``, ``500``, each with a ``Status`` body).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

kubernetes = pytest.importorskip("kubernetes")
from kubernetes import client  # noqa: E402

from gangplace import Cluster, GangRequest, InvalidRequest, Placement  # noqa: E402
from gangplace.k8s import BindResult, bind, bindings  # noqa: E402


class ApiServer:
    """The stand-in: ``requests`` seen, ``answers[(method, path)] = (status, body)``."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, str | None, Any]] = []
        self.answers: dict[tuple[str, str], tuple[int, dict[str, Any]]] = {}
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _serve(self, method: str, default: tuple[int, dict[str, Any]]) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw) if raw else None
                server.requests.append((method, self.path, self.headers.get("Content-Type"), body))
                status, reply = server.answers.get((method, self.path), default)
                data = json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_PATCH(self) -> None:
                name = self.path.rsplit("/", 1)[-1]
                self._serve("PATCH", (200, _pod(name, None)))

            def do_POST(self) -> None:
                self._serve("POST", (201, _status(201, "Success", "")))

            def do_GET(self) -> None:
                self._serve("GET", (404, _status(404, "NotFound", "not found")))

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.http.serve_forever, daemon=True)
        self.thread.start()

    def api(self) -> Any:
        config = client.Configuration(host=f"http://127.0.0.1:{self.http.server_port}")
        return client.CoreV1Api(client.ApiClient(config))

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success" if code < 300 else "Failure",
        "reason": reason,
        "message": message,
        "code": code,
    }


def _pod(name: str, node: str | None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {"containers": [{"name": "c", "image": "i"}], "nodeName": node},
    }


@pytest.fixture
def server() -> Iterator[ApiServer]:
    running = ApiServer()
    yield running
    running.close()


def _placement(pods: int = 3) -> Placement:
    cluster = Cluster(["rack"])
    for index in range(4):
        cluster.add_node(f"n{index}", gpus=8, topology={"rack": "r0"})
    placement = cluster.place_gang(GangRequest(pods, 8))
    assert placement is not None
    return placement


def test_bind_patches_then_binds_every_pod_in_rank_order(server: ApiServer) -> None:
    placement = _placement()
    pods = [f"job-{rank}" for rank in range(3)]
    result = bind(server.api(), placement, pods, allocation="a1", namespace="ml")
    assert result == BindResult(("ml/job-0", "ml/job-1", "ml/job-2"), None, ())
    assert result.ok
    expected: list[tuple[str, str, str | None, Any]] = []
    for rank, (pod, node) in enumerate(zip(pods, placement.nodes, strict=True)):
        annotations = {
            "gangplace.io/rank": str(rank),
            "gangplace.io/gpus": "0,1,2,3,4,5,6,7",
            "gangplace.io/allocation": "a1",
        }
        expected.append(
            (
                "PATCH",
                f"/api/v1/namespaces/ml/pods/{pod}",
                "application/merge-patch+json",
                {"metadata": {"annotations": annotations}},
            )
        )
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": pod, "namespace": "ml"},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        expected.append(("POST", "/api/v1/namespaces/ml/bindings", None, binding))
    seen = [(m, p, (t or "").split(";")[0] or None, b) for m, p, t, b in server.requests]
    assert [(m, p, b) for m, p, _, b in seen] == [(m, p, b) for m, p, _, b in expected]
    assert [t for m, _, t, _ in seen if m == "PATCH"] == ["application/merge-patch+json"] * 3


@pytest.mark.parametrize(
    ("method", "status", "where"),
    [
        ("PATCH", 404, "annotating: HTTP 404 Not Found: pods not found"),
        ("PATCH", 500, "annotating: HTTP 500 Internal Server Error: etcd timeout"),
        ("POST", 500, "binding to n1: HTTP 500 Internal Server Error: etcd timeout"),
        ("POST", 404, "binding to n1: HTTP 404 Not Found: pods not found"),
    ],
)
def test_a_failure_part_way_says_what_was_bound_and_what_was_not(
    server: ApiServer, method: str, status: int, where: str
) -> None:
    placement = _placement()
    message = "pods not found" if status == 404 else "etcd timeout"
    reason = "NotFound" if status == 404 else "InternalError"
    path = "/api/v1/namespaces/ml/pods/job-1"
    if method == "POST":
        path = "/api/v1/namespaces/ml/bindings"
        # The first binding succeeds; the answer is set once the first pod is bound.
        original = server.answers

        class SecondFails(dict[tuple[str, str], tuple[int, dict[str, Any]]]):
            def get(self, key: Any, default: Any = None) -> Any:
                posts = sum(1 for m, *_ in server.requests if m == "POST")
                if key == ("POST", path) and posts == 2:
                    return (status, _status(status, reason, message))
                return original.get(key, default)

        server.answers = SecondFails()
    else:
        server.answers[(method, path)] = (status, _status(status, reason, message))
    result = bind(server.api(), placement, ["job-0", "job-1", "job-2"], namespace="ml")
    assert result.bound == ("ml/job-0",)
    assert result.failed == ("ml/job-1", where)
    assert result.not_tried == ("ml/job-2",)
    assert not result.ok
    # Nothing was sent for the pod not tried.
    assert not any("job-2" in p for _, p, *_ in server.requests)
    # K9: a pod annotated but not bound loses its annotations (a null removes a key).
    patches = [b for m, p, _, b in server.requests if m == "PATCH" and p.endswith("/job-1")]
    if method == "POST":
        assert patches[-1] == {
            "metadata": {"annotations": dict.fromkeys(patches[0]["metadata"]["annotations"])}
        }
    else:
        assert len(patches) == 1  # the annotation itself failed: nothing to remove


@pytest.mark.parametrize(("bound_to", "ok"), [("n1", True), ("n3", False)])
def test_a_pod_already_bound_counts_only_on_its_own_node(
    server: ApiServer, bound_to: str, ok: bool
) -> None:
    placement = _placement(2)
    assert placement.nodes == ("n0", "n1")
    conflict = _status(409, "Conflict", 'pod job-1 is already assigned to node "x"')

    class SecondConflicts(dict[tuple[str, str], tuple[int, dict[str, Any]]]):
        def get(self, key: Any, default: Any = None) -> Any:
            posts = sum(1 for m, *_ in server.requests if m == "POST")
            if key == ("POST", "/api/v1/namespaces/ml/bindings") and posts == 2:
                return (409, conflict)
            if key == ("GET", "/api/v1/namespaces/ml/pods/job-1"):
                return (200, _pod("job-1", bound_to))
            return default

    server.answers = SecondConflicts()
    result = bind(server.api(), placement, ["job-0", "job-1"], namespace="ml")
    assert result.ok is ok
    if ok:
        assert result.bound == ("ml/job-0", "ml/job-1")
    else:
        assert result.failed is not None and result.failed[0] == "ml/job-1"
        assert "HTTP 409 Conflict" in result.failed[1]


def test_pods_as_objects_and_dicts_give_their_own_namespace_and_name() -> None:
    placement = _placement(3)
    pods: list[Any] = [
        client.V1Pod(metadata=client.V1ObjectMeta(name="a", namespace="team-a")),
        {"metadata": {"name": "b", "namespace": "team-b"}},
        "c",
    ]
    made = bindings(placement, pods, namespace="fallback", allocation="a9")
    names = [(b.metadata.namespace, b.metadata.name, b.target.name) for b, _ in made]
    assert names == [
        ("team-a", "a", placement.nodes[0]),
        ("team-b", "b", placement.nodes[1]),
        ("fallback", "c", placement.nodes[2]),
    ]
    patch = made[2][1]
    assert isinstance(patch, dict)
    assert patch["metadata"]["annotations"]["gangplace.io/allocation"] == "a9"


@pytest.mark.parametrize(
    ("pods", "match"),
    [
        (["a", "b"], "2 pod names for 3 placed pods"),
        ("abc", "pods must be a sequence of pods, not str"),
        ({"metadata": {"name": "a"}}, "pods must be a sequence of pods, not dict"),
        (None, "pods must be a sequence of pods, not NoneType"),
        (["a", "b", {"metadata": None}], r"pod 2: metadata.name must be a non-empty string"),
        (["a", "b", {"metadata": {"name": ""}}], r"pod 2: metadata.name"),
        (["a", "b", {"metadata": {"name": "c", "namespace": 7}}], r"pod 2: metadata.namespace"),
        (["a", 5, "c"], r"pod 1: metadata.name must be a non-empty string, got None"),
    ],
)
def test_bad_pods_raise_invalid_request_and_send_nothing(
    server: ApiServer, pods: Any, match: str
) -> None:
    placement = _placement(3)
    with pytest.raises(InvalidRequest, match=match):
        bind(server.api(), placement, pods, namespace="ml")
    assert server.requests == []
