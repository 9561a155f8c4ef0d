"""Assembling one self-contained HTML document: the Jinja2 templates (autoescaped), the
inline CSS and scripts, and the Content-Security-Policy that allows exactly those."""

from __future__ import annotations

import base64
import hashlib
import json
from functools import lru_cache
from importlib import resources
from typing import Any

import jinja2

from app.assets import STATIC
from app.figures import Spec

# The bundle the dashboard draws with (make plotly-bundle). An install without the
# repository's static/ falls back to plotly.py's own bundle: the same plotly.js release,
# with every trace type, so three times the size.
PLOTLY_BUNDLE = STATIC / "vendor" / "plotly-cartesian.min.js"

# Charts are drawn at a fixed width so that the file looks the same on every screen and
# the print stylesheet can scale each one to fit a page (see print_zoom).
CHART_WIDTH_PX = 1000
# A4 portrait with 10 mm margins, in CSS pixels (96 per inch), less room for the heading.
PAGE_WIDTH_PX = 718
PAGE_HEIGHT_PX = 960

# plotly.js adds its own rules through an empty <style> element it creates (then CSSOM,
# which CSP does not govern): the hash of the empty string lets that element in.
_EMPTY_STYLE = ""


@lru_cache(maxsize=1)
def plotly_js() -> str:
    if PLOTLY_BUNDLE.is_file():
        return PLOTLY_BUNDLE.read_text("utf-8")
    from plotly.offline import get_plotlyjs

    return str(get_plotlyjs())


def asset(name: str) -> str:
    """A file of templates/ (CSS, draw.js), read as package data."""
    return resources.files("app.export").joinpath("templates", name).read_text("utf-8")


@lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    # The bytecode cache (the user's own directory under the system's temporary one, keyed
    # by each template's source): compiling the templates was a fifth of a `moescope
    # export` process.
    return jinja2.Environment(
        loader=jinja2.PackageLoader("app.export", "templates"),
        bytecode_cache=jinja2.FileSystemBytecodeCache(),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


@lru_cache(maxsize=32)
def csp_hash(source: str) -> str:
    digest = hashlib.sha256(source.encode("utf-8")).digest()
    return "'sha256-" + base64.b64encode(digest).decode("ascii") + "'"


def content_security_policy(scripts: list[str], styles: list[str]) -> str:
    """Nothing may load (default-src 'none'); only these exact inline scripts and style
    elements run. Style attributes stay allowed: plotly.js styles its SVG with them, and
    with every fetch refused they cannot reach anything. Images only as data: URLs: plotly
    paints a heatmap on a canvas and shows it as one."""
    script_src = " ".join(csp_hash(s) for s in scripts) or "'none'"
    style_src = " ".join(csp_hash(s) for s in [*styles, _EMPTY_STYLE])
    return (f"default-src 'none'; script-src {script_src}; style-src {style_src}; "
            "style-src-attr 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'")


def json_for_script(value: Any) -> str:
    """JSON that cannot end its <script> element or open a comment inside it."""
    text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def print_zoom(spec: Spec) -> float:
    """How much the print stylesheet shrinks a chart so that it fits one page."""
    layout = spec["layout"]
    width = float(layout.get("width") or CHART_WIDTH_PX)
    height = float(layout.get("height") or 450)
    return round(min(1.0, PAGE_WIDTH_PX / width, PAGE_HEIGHT_PX / height), 3)


def export_spec(spec: Spec) -> Spec:
    """A chart's spec as the export draws it: at the fixed width, with its own legend (the
    dashboard shows one shared legend instead; a printed page needs the chart's own)."""
    layout = {k: v for k, v in spec["layout"].items() if k != "showlegend"}
    return {"data": spec["data"], "layout": {**layout, "width": CHART_WIDTH_PX}}


def render(template: str, charts: dict[str, Spec], **context: Any) -> str:
    """The whole document: ``charts`` (element id -> spec) drawn by draw.js; a document
    without a chart carries no script at all."""
    env = _environment()
    zooms = "".join(f"#{key}{{zoom:{print_zoom(spec)}}}" for key, spec in charts.items())
    css = asset("export.css") + f"@media print{{{zooms}}}\n"
    scripts = [plotly_js(), asset("draw.js")] if charts else []
    return env.get_template(template).render(
        csp=content_security_policy(scripts, [css]), css=css, scripts=scripts,
        chart_specs={key: json_for_script(spec) for key, spec in charts.items()},
        **context,
    )
