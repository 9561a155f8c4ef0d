"""The commands' reads from a moescope server (``export --url``, ``regressions --url``):
the read side of runner/http.py's Poster, with the same bearer header and the same reading
of a refusal. Needs httpx only."""

from __future__ import annotations

from collections.abc import Sequence

import httpx

from cli.errors import CommandError
from runner.http import answer_detail, bearer_headers, resolve_token

Params = Sequence[tuple[str, str]]


class ServiceClient:
    """GETs under one server's URL with one token (``--token``, else MOESCOPE_TOKEN). A
    refusal or no answer is a CommandError (exit ``failure_status``) naming the path and
    the service's ``detail``."""

    def __init__(self, url: str, token: str | None, *, failure_status: int = 1,
                 timeout_s: float = 300.0) -> None:
        self.url = url.rstrip("/")
        self.failure_status = failure_status
        self._client = httpx.Client(base_url=self.url, headers=bearer_headers(
            resolve_token(token)), timeout=timeout_s)

    def __enter__(self) -> ServiceClient:
        return self

    def __exit__(self, *_: object) -> None:
        self._client.close()

    def get(self, path: str, params: Params = ()) -> httpx.Response:
        try:
            response = self._client.get(path, params=list(params))
        except httpx.HTTPError as exc:
            raise CommandError(f"cannot reach {self.url}: {exc}", self.failure_status) from exc
        if response.status_code != 200:
            raise CommandError(f"{path}: HTTP {response.status_code}: "
                               f"{answer_detail(response)}", self.failure_status)
        return response
