"""One settings object for the service, read from ``MOESCOPE_*`` environment variables."""

from __future__ import annotations

from functools import lru_cache

from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="MOESCOPE_", extra="ignore")

    database_url: str = "sqlite:///moescope.db"
    max_body_mb: float = 32.0
    require_read_token: bool = False
    page_size_max: int = 100
    db_pool_size: int = 10
    db_connect_timeout_s: float = 5.0
    retry_after_s: int = 5
    # Origins whose pages may call the API from a browser, comma-separated ("*": any);
    # empty: CORS off, as a same-origin dashboard needs.
    cors_origins: str = ""
    gzip_min_bytes: int = 1024
    # Where an opened alert is POSTed (comma-separated); with a secret, each body is signed
    # (HMAC-SHA256, hex, in X-Moescope-Signature). Attempts per URL, the first wait between
    # them (doubled each time) and each attempt's timeout.
    webhook_urls: str = ""
    webhook_secret: str = ""
    webhook_attempts: int = 4
    webhook_backoff_s: float = 0.5
    webhook_timeout_s: float = 5.0

    def webhook_url_list(self) -> list[str]:
        return [u.strip() for u in self.webhook_urls.split(",") if u.strip()]

    def cors_origin_list(self) -> list[str]:
        return [o.strip() for o in self.cors_origins.split(",") if o.strip()]


@lru_cache
def get_settings() -> Settings:
    return Settings()
