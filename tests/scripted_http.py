"""A real HTTP server on a free port that gives scripted answers in turn and records
each request: what a client's retries do against a service that is down or busy."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Answer:
    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Request:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Scripted:
    url: str
    answers: list[Answer]
    requests: list[Request] = field(default_factory=list)


@contextmanager
def scripted_server(answers: list[Answer]) -> Iterator[Scripted]:
    """Answers in order; the last one repeats once the script runs out."""
    script = Scripted("", list(answers))

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the name http.server calls
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            script.requests.append(Request(self.path, dict(self.headers), body))
            answer = script.answers.pop(0) if len(script.answers) > 1 else script.answers[0]
            data = json.dumps(answer.body).encode()
            self.send_response(answer.status)
            for name, value in answer.headers.items():
                self.send_header(name, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    script.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield script
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
