"""Render report sections as Markdown and self-contained HTML.

Everything a section carries is *plain text* (model names, run ids,
predictions, our own labels alike); escaping happens here and only here, at
the moment text meets markup, so no caller can forget it or do it twice.
"""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Sequence
from dataclasses import dataclass

_MD_SPECIAL = re.compile(r"([\\`*_\[\]|#~$])")
_NEWLINES = re.compile(r"[\r\n]+")


def md_escape(text: object) -> str:
    """Escape text for a Markdown table cell or paragraph.

    ``&``, ``<`` and ``>`` become entities (Markdown passes raw HTML through,
    so ``<script>`` must not survive); ``\\ ` * _ [ ] | # ~ $`` get backslashes;
    newlines collapse to spaces so a value cannot break a table row.
    """
    text = str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MD_SPECIAL.sub(r"\\\1", _NEWLINES.sub(" ", text))


def html_text(text: object) -> str:
    """Escape text for HTML element content or a quoted attribute."""
    return html.escape(str(text), quote=True)


def truncate(text: object, limit: int) -> str:
    text = str(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True)
class Table:
    """A plain-text table; ``pre`` names columns shown verbatim (in <pre>) in HTML."""

    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    caption: str = ""
    pre: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Figure:
    """A rendered PNG plot; ``alt`` is plain text."""

    png: bytes
    alt: str


@dataclass(frozen=True)
class Section:
    title: str
    paragraphs: tuple[str, ...] = ()
    tables: tuple[Table, ...] = ()
    figures: tuple[Figure, ...] = ()
    collapsed: bool = False
    markdown: bool = True  # False: HTML only (plots-only sections)
    notes: tuple[str, ...] = ()


def _md_table(table: Table, *, cell_limit: int) -> list[str]:
    lines = []
    if table.caption:
        lines += [f"**{md_escape(table.caption)}**", ""]
    lines.append("| " + " | ".join(md_escape(h) for h in table.headers) + " |")
    lines.append("|" + "|".join("---" for _ in table.headers) + "|")
    for row in table.rows:
        cells = (md_escape(truncate(c, cell_limit)) for c in row)
        lines.append("| " + " | ".join(cells) + " |")
    return lines + [""]


def render_markdown(
    title: str, sections: Sequence[Section], *, preamble: Sequence[str] = (), cell_limit: int = 300
) -> str:
    """The report as Markdown (tables and text; plots live in the HTML)."""
    lines = [f"# {md_escape(title)}", ""]
    lines += [line for p in preamble for line in (md_escape(p), "")]
    for section in sections:
        if not section.markdown:
            continue
        lines += [f"## {md_escape(section.title)}", ""]
        lines += [line for p in section.paragraphs for line in (md_escape(p), "")]
        for table in section.tables:
            lines += _md_table(table, cell_limit=cell_limit)
        lines += [line for n in section.notes for line in (f"_{md_escape(n)}_", "")]
    return "\n".join(lines).rstrip() + "\n"


_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:2rem auto;max-width:1400px;
padding:0 1rem;color:#1b1f24;line-height:1.45}
h1{font-size:1.6rem}h2{font-size:1.25rem;margin-top:2rem;border-bottom:1px solid #d0d7de}
table{border-collapse:collapse;margin:.75rem 0;font-size:.86rem}
th,td{border:1px solid #d0d7de;padding:.25rem .5rem;text-align:right;vertical-align:top}
th{background:#f6f8fa}td:first-child,th:first-child{text-align:left}
tbody tr:nth-child(even){background:#fbfcfd}caption{text-align:left;font-weight:600;padding:.25rem 0}
pre{white-space:pre-wrap;word-break:break-word;margin:0;max-width:48rem;text-align:left;
font-size:.8rem}
img{max-width:100%;height:auto;display:block;margin:.75rem 0}
details{margin:1rem 0}summary{cursor:pointer;font-weight:600}.note{color:#57606a;font-size:.85rem}
"""

# Defence in depth: even if something unescaped slipped through, nothing could run or load.
_CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"


def _html_table(table: Table) -> str:
    parts = ["<table>"]
    if table.caption:
        parts.append(f"<caption>{html_text(table.caption)}</caption>")
    parts.append(
        "<thead><tr>"
        + "".join(f"<th>{html_text(h)}</th>" for h in table.headers)
        + "</tr></thead><tbody>"
    )
    for row in table.rows:
        cells = []
        for header, cell in zip(table.headers, row, strict=True):
            body = html_text(cell)
            cells.append(
                f"<td><pre>{body}</pre></td>" if header in table.pre else f"<td>{body}</td>"
            )
        parts.append("<tr>" + "".join(cells) + "</tr>")
    parts.append("</tbody></table>")
    return "\n".join(parts)


def _html_figure(figure: Figure) -> str:
    data = base64.b64encode(figure.png).decode("ascii")
    return f'<img alt="{html_text(figure.alt)}" src="data:image/png;base64,{data}">'


def render_html(title: str, sections: Sequence[Section], *, preamble: Sequence[str] = ()) -> str:
    """The report as one HTML file: inline CSS, inline PNGs, no external references."""
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{html_text(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{html_text(title)}</h1>",
    ]
    out += [f"<p>{html_text(p)}</p>" for p in preamble]
    for section in sections:
        body = [f"<p>{html_text(p)}</p>" for p in section.paragraphs]
        body += [_html_table(t) for t in section.tables]
        body += [_html_figure(f) for f in section.figures]
        body += [f'<p class="note">{html_text(n)}</p>' for n in section.notes]
        if section.collapsed:
            out.append(f"<details><summary>{html_text(section.title)}</summary>")
            out += body
            out.append("</details>")
        else:
            out.append(f"<section><h2>{html_text(section.title)}</h2>")
            out += body
            out.append("</section>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"
