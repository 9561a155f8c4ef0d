"""Reading an exported HTML file back: the texts of its elements, its tables, its charts."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from typing import Any

GENERATED = re.compile(r'(<time id="export-generated">)[^<]*(</time>)')
_VOID = {"meta", "br", "img", "input", "link", "hr", "col", "area", "base", "wbr", "source"}


def masked(document: str) -> str:
    """The document with its generation time blanked: what must be the same every time."""
    return GENERATED.sub(r"\1\2", document)


class Element:
    def __init__(self, tag: str, attrs: dict[str, str]) -> None:
        self.tag, self.attrs = tag, attrs
        self.children: list[Element] = []
        self.parts: list[str] = []

    @property
    def text(self) -> str:
        return "".join(self.parts)

    def iter(self) -> Any:
        yield self
        for child in self.children:
            yield from child.iter()

    def find_all(self, tag: str | None = None, **attrs: str) -> list[Element]:
        return [e for e in self.iter() if (tag is None or e.tag == tag)
                and all(e.attrs.get(k.rstrip("_")) == v for k, v in attrs.items())]

    def by_id(self, ident: str) -> Element:
        found = self.find_all(id=ident)
        assert len(found) == 1, f"{len(found)} elements with id {ident!r}"
        return found[0]

    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())


class _Builder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Element("#document", {})
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].children.append(element)
        if tag not in _VOID:
            self.stack.append(element)

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i].tag == tag:
                del self.stack[i:]
                return

    def handle_data(self, data: str) -> None:
        for element in self.stack[1:]:
            element.parts.append(data)


def parse(document: str) -> Element:
    builder = _Builder()
    builder.feed(document)
    builder.close()
    return builder.root


def table_rows(table: Element) -> list[list[str]]:
    """The cells' texts of each row (header rows included)."""
    return [[cell.text.strip() for cell in row.children if cell.tag in ("td", "th")]
            for row in table.find_all("tr")]


def chart_specs(root: Element) -> dict[str, Any]:
    return {e.attrs["data-chart"]: json.loads(e.text)
            for e in root.find_all("script", type="application/json")}
