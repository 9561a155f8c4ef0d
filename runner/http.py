"""The one HTTP poster for everything that sends to the service: the runner's sender,
``moescope runner flush`` and ``moescope ingest --url`` (the commands' reads go through
cli/service_client.py, with the same header and the same reading of a refusal).

A post is retried while the answer says the service is down or busy (408, 425, 429, any
5xx) or no answer came (connection refused, timeout), with exponential backoff and
jitter (so ranks or nodes that lost the service together do not return in step),
waiting at least what a Retry-After header asks, until an overall deadline. Any other
answer (2xx, or a 4xx that resending cannot change) is returned at once.
"""

from __future__ import annotations

import email.utils
import json
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

# Besides every 5xx: the answers that mean "not now" rather than "not this".
RETRY_STATUS = frozenset({408, 425, 429})


def retryable(status: int) -> bool:
    return status in RETRY_STATUS or 500 <= status < 600


def equal_jitter(delay: float) -> float:
    """Half the delay fixed, half random: the backoff still grows, the clients spread."""
    return delay / 2 + random.uniform(0, delay / 2)


def resolve_url(url: str | None) -> str | None:
    return url or os.environ.get("MOESCOPE_URL") or None


def resolve_token(token: str | None) -> str | None:
    return token or os.environ.get("MOESCOPE_TOKEN") or None


def bearer_headers(token: str | None) -> dict[str, str]:
    """The service's authentication, as every request to it sends it."""
    return {"Authorization": f"Bearer {token}"} if token else {}


def answer_detail(response: httpx.Response) -> Any:
    """What a refusal says: the service's ``detail`` (its errors' one shape), else the start
    of whatever else answered (a proxy's page)."""
    try:
        return response.json().get("detail")
    except (ValueError, AttributeError):
        return response.text[:300]


class Unreachable(ConnectionError):
    """No answer from the service (connection error or timeout) before the deadline."""


@dataclass(frozen=True)
class Posted:
    response: httpx.Response
    attempts: int

    @property
    def gave_up(self) -> bool:
        """The last answer still said "retry": the deadline ran out, not the service."""
        return retryable(self.response.status_code)


@dataclass
class Poster:
    url: str  # the service's base URL
    token: str | None
    timeout_s: float = 30.0
    base_delay_s: float = 0.5
    max_delay_s: float = 10.0
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic
    jitter: Callable[[float], float] = equal_jitter

    def post_json(self, path: str, body: Any, deadline_s: float) -> Posted:
        return self.post(path, json.dumps(body, allow_nan=False).encode(), deadline_s)

    def post(self, path: str, body: bytes, deadline_s: float) -> Posted:
        """POST ``body`` (JSON) to the service's ``path`` until an answer retrying cannot
        change or ``deadline_s`` has passed (0: a single attempt). Returns the last
        answer; raises Unreachable when the last attempt got none."""
        headers = {"Content-Type": "application/json", **bearer_headers(self.token)}
        end = self.clock() + deadline_s
        delay = self.base_delay_s
        attempt = 0
        while True:
            attempt += 1
            response: httpx.Response | None = None
            asked = 0.0
            try:
                response = httpx.post(self.url.rstrip("/") + path, content=body,
                                      headers=headers, timeout=self.timeout_s)
            except httpx.HTTPError as exc:
                problem = f"{type(exc).__name__}: {exc}"
            else:
                if not retryable(response.status_code):
                    return Posted(response, attempt)
                problem = f"HTTP {response.status_code}"
                asked = retry_after(response)
            left = end - self.clock()
            # A Retry-After past the deadline: waiting for it would only end in giving up.
            if left <= 0 or asked > left:
                if response is not None:
                    return Posted(response, attempt)
                raise Unreachable(f"{problem} (gave up after {attempt} attempt(s))")
            self.sleep(min(max(self.jitter(delay), asked), left))
            delay = min(delay * 2, self.max_delay_s)


def retry_after(response: httpx.Response) -> float:
    """Seconds the service asked to wait (Retry-After: seconds or an HTTP date), else 0."""
    value = response.headers.get("Retry-After")
    if not value:
        return 0.0
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return 0.0
    return max(0.0, when.timestamp() - time.time())
