"""The browser tests' one live server (conftest's ``shared_server``): started once per
session on its own Postgres database, each browser module posting its reports to it.

Modules share the database, so none may read another's rows as its own: a module posts
under a GPU of its own (``on_gpu``: a series of its own, ingest.series) and asserts on the
ids it posted. A module whose pages show the whole database (the report list, compare's
default pair, the platforms page's newest report of each GPU) first empties it through
the API (``empty``); modules run one after another, so its reports are then all there is
until its last test."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import httpx
from live import ServerProcess

Body = dict[str, Any]
TIMEOUT_S = 60


def on_gpu(bodies: list[Body], gpu: str) -> list[Body]:
    """Copies of ``bodies`` reported by ``gpu``: a series no other module posts to."""
    moved = [copy.deepcopy(b) for b in bodies]
    for body in moved:
        body["meta"]["gpu"] = gpu
    return moved


@dataclass(frozen=True)
class SharedServer:
    live: ServerProcess
    ingest_token: str
    admin_token: str

    @property
    def url(self) -> str:
        return self.live.url

    def post(self, bodies: list[Body]) -> list[int]:
        """Post ``bodies`` in order through the API; their ids (each a new report)."""
        ids = []
        for body in bodies:
            response = httpx.post(self.url + "/api/v1/reports", json=body, timeout=TIMEOUT_S,
                                  headers={"Authorization": f"Bearer {self.ingest_token}"})
            assert response.status_code == 201, response.text
            ids.append(int(response.json()["id"]))
        return ids

    def empty(self) -> None:
        """Delete every report through the API, and check that none is left."""
        headers = {"Authorization": f"Bearer {self.admin_token}"}
        while ids := self._report_ids(headers):
            for report_id in ids:
                response = httpx.delete(f"{self.url}/api/v1/reports/{report_id}",
                                        headers=headers, timeout=TIMEOUT_S)
                assert response.status_code == 204, response.text
        listed = httpx.get(self.url + "/api/v1/reports", headers=headers, timeout=TIMEOUT_S)
        assert listed.json()["total"] == 0, listed.text

    def _report_ids(self, headers: dict[str, str]) -> list[int]:
        response = httpx.get(self.url + "/api/v1/reports", params={"limit": 100},
                             headers=headers, timeout=TIMEOUT_S)
        assert response.status_code == 200, response.text
        return [int(item["id"]) for item in response.json()["items"]]
