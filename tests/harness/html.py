"""Reading the status page's HTML as a person sees it: the cells of a table's rows."""

from __future__ import annotations

import re
from html.parser import HTMLParser

__all__ = ["Rows", "parse", "parse_counts", "section"]


class Rows(HTMLParser):
    """The text of each ``tr`` of the tables of one class (``rows``: headers included, in page
    order; ``body``: the rows outside ``thead``), and every ``a href``."""

    def __init__(self, table_class: str) -> None:
        super().__init__()
        self.table_class = table_class
        self.depth = 0
        self.rows: list[list[str]] = []
        self.body: list[list[str]] = []
        self.hrefs: list[str] = []
        self._cell: list[str] | None = None
        self._in_head = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "a" and a.get("href"):
            self.hrefs.append(str(a["href"]))
        if tag == "table" and self.table_class in (a.get("class") or "").split():
            self.depth = 1
        elif tag == "table" and self.depth:
            self.depth += 1
        if self.depth == 1 and tag == "thead":
            self._in_head = True
        if self.depth == 1 and tag == "tr":
            self.rows.append([])
            if not self._in_head:
                self.body.append(self.rows[-1])
        if self.depth == 1 and tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if self.depth == 1 and tag == "thead":
            self._in_head = False
        if tag == "table" and self.depth:
            self.depth -= 1
        if self.depth == 1 and tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append(" ".join("".join(self._cell).split()))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def parse(html: str, table_class: str) -> Rows:
    """The rows of every table of class ``table_class`` in ``html``."""
    p = Rows(table_class)
    p.feed(html)
    return p


def parse_counts(html: str) -> list[str]:
    """[word, count, word, count, ...] from the counts list."""
    return [x for pair in re.findall(
        r'class="badge [a-z]+">\S+ ([A-Z]+)</span> <span class="count" data-status="\1">(\d+)',
        html) for x in pair]


def section(html: str, label: str) -> str:
    """The HTML of the ``<section>`` whose ``aria-label`` is ``label`` (one probe's part of a
    page that lists several)."""
    match = re.search(rf'<section[^>]*aria-label="{re.escape(label)}"[^>]*>(.*?)</section>',
                      html, flags=re.S)
    if match is None:
        raise AssertionError(f"no section labelled {label!r} in the page")
    return match.group(1)
