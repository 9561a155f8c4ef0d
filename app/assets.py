"""Where the static files are: CSS, the case table's cell renderers, the favicon and the
vendored plotly.js bundle, in static/ at the repository root (beside app/). The dashboard
serves them; the HTML export inlines the bundle."""

from __future__ import annotations

from pathlib import Path

STATIC = Path(__file__).resolve().parents[1] / "static"
