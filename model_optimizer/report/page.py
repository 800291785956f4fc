"""The HTML page of a report: one self-contained file (inline CSS and SVG, no script, no
request to anywhere), tables built from already-formatted cells."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape

CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1d2330;
background:#f6f7f9}
main{max-width:980px;margin:0 auto;padding:24px 20px 48px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid
#dde1e7;padding-bottom:4px}
.sub{color:#5b6475;margin:0 0 16px}.muted{color:#5b6475}
.verdict{padding:10px 14px;border-radius:6px;margin:12px 0;font-weight:600}
.verdict.ok{background:#e5f5ea;color:#1d6b35}.verdict.warn{background:#fff4d6;color:#7a5300}
.verdict.bad{background:#fde8e8;color:#9b1c1c}
table{border-collapse:collapse;background:#fff;margin:8px 0;font-variant-numeric:tabular-nums}
th,td{border:1px solid #dde1e7;padding:4px 8px;text-align:right}th{background:#eef1f5}
td:first-child,th:first-child{text-align:left}
#steps td:nth-child(3),#steps td:nth-child(4),#steps td:last-child,#trials td:last-child,
#stages td{text-align:left}
.chart{background:#fff;border:1px solid #dde1e7;max-width:100%;height:auto}
.axis{stroke:#5b6475}.grid{stroke:#eef1f5}.tick{font-size:11px;fill:#5b6475}
.label{font-size:12px;fill:#1d2330}.pt{fill:#2457c5}.err{stroke:#2457c5;stroke-width:1.4}
.band{fill:#2457c5;opacity:.12}.fit{fill:none;stroke:#2457c5;stroke-dasharray:4 3}
.chosen{stroke:#c0392b;stroke-width:1.5;stroke-dasharray:5 4}.chosen-label{fill:#c0392b;
font-size:12px}
pre{background:#fff;border:1px solid #dde1e7;padding:8px;overflow-x:auto;font-size:12px}
a{color:#2457c5}
"""


@dataclass
class Page:
    """A report page being built: a title, a subtitle and HTML sections in order."""

    title: str
    subtitle: str = ""
    parts: list[str] = field(default_factory=list)

    def heading(self, text: str) -> None:
        self.parts.append(f"<h2>{escape(text)}</h2>")

    def paragraph(self, text: str, css: str = "") -> None:
        klass = f' class="{css}"' if css else ""
        self.parts.append(f"<p{klass}>{escape(text)}</p>")

    def verdict(self, text: str, level: str) -> None:
        """A highlighted line: ``level`` is ok, warn or bad."""
        self.parts.append(f'<div class="verdict {level}">{escape(text)}</div>')

    def table(self, header: Sequence[str], rows: Sequence[Sequence[str]],
              table_id: str = "") -> None:
        ident = f' id="{escape(table_id)}"' if table_id else ""
        head = "".join(f"<th>{escape(h)}</th>" for h in header)
        body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in _escaped(row)) + "</tr>"
                       for row in rows)
        self.parts.append(f"<table{ident}><thead><tr>{head}</tr></thead><tbody>{body}</tbody>"
                          "</table>")

    def link_table(self, header: Sequence[str], rows: Sequence[tuple[str, Sequence[str]]]
                   ) -> None:
        """A table whose first cell links: rows of (href, cells)."""
        head = "".join(f"<th>{escape(h)}</th>" for h in header)
        body = []
        for href, cells in rows:
            first, *rest = _escaped(cells)
            link = f'<a href="{escape(href)}">{first}</a>' if href else first
            body.append("<tr><td>" + link + "</td>" + "".join(f"<td>{c}</td>" for c in rest)
                        + "</tr>")
        self.parts.append(f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}"
                          "</tbody></table>")

    def raw(self, html: str) -> None:
        """Add HTML built by this package (an SVG chart)."""
        self.parts.append(html)

    def preformatted(self, text: str) -> None:
        self.parts.append(f"<pre>{escape(text)}</pre>")

    def render(self) -> str:
        sub = f'<p class="sub">{escape(self.subtitle)}</p>' if self.subtitle else ""
        return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
                "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"
                f"<title>{escape(self.title)}</title><style>{CSS}</style></head><body><main>"
                f"<h1>{escape(self.title)}</h1>{sub}{''.join(self.parts)}</main></body></html>\n")


def _escaped(cells: Sequence[str]) -> list[str]:
    return [escape(str(cell)) for cell in cells]
