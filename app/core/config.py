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

    def cors_origin_list(self) -> list[str]:
        return [o.strip() for o in self.cors_origins.split(",") if o.strip()]


@lru_cache
def get_settings() -> Settings:
    return Settings()
