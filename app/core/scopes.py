"""The token scopes, each granting the ones before it (admin > ingest > read). Standard
library only: the command line's parser reads them too."""

from __future__ import annotations

SCOPES = ("read", "ingest", "admin")
