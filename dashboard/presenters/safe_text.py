"""User-supplied text leaving the dashboard: as Markdown text on a page, as a CSV cell.

- On a page, Streamlit renders the body of st.markdown / caption / info / warning / error /
  success / toast, progress texts and widget labels as Markdown: a column named
  `![x](https://host/p.png)` would make every viewer's browser fetch that address, `[text](url)`
  would be a link, `:red[...]`, `$...$`, `**...**` would change how it reads. `md()` escapes
  every ASCII punctuation character with a backslash (CommonMark allows it for all of them), so
  the text shows exactly as written and nothing in it is Markdown, HTML, a directive or maths.
  GitHub's auto-links (`www.x.org`, `https://x.org`, `a@x.org`) are found in the text after the
  escapes are read, so an invisible WORD JOINER (U+2060) goes where it breaks them: after `www`
  and a scheme, before `@`. Every file, site, column, category, run or data name and every error message that
  quotes one goes through it; tables (st.dataframe) show their cells as text already.
- In a plotly figure, texts (tick labels, legend names, titles, hover) are a subset of HTML:
  `<a href=...>` is a link, `<b>` bold. `plot_text()` escapes `&`, `<` and `>` so a name is drawn
  as written; `dashboard.presenters.figures` applies it to every category and trace name it draws, and
  `plot_lines()` builds a hover of several lines (each escaped once, joined by `<br>`).
- In a CSV file, a spreadsheet runs a text cell that starts with `=`, `+`, `-`, `@`, a tab or a
  carriage return as a formula (OWASP, "CSV injection"). `csv_bytes()` prefixes such text cells,
  and such column names, with `'`. Numbers stay numbers: numeric columns are left alone, and so
  is a text cell that is a plain number ("-0.5"), which a spreadsheet reads as that number.
"""

from __future__ import annotations

import html
import re
import string
from collections.abc import Iterable
from typing import Any

import pandas as pd

_PUNCTUATION = re.compile("([" + re.escape(string.punctuation) + "])")
_AUTOLINK = re.compile(r"(?i)(\bwww(?=\.)|\b(?:https?|ftp|mailto|xmpp)(?=:)|(?=@))")
WORD_JOINER = "\u2060"
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_PLAIN_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def md(value: Any) -> str:
    """`value` as text that Markdown shows literally."""
    return _PUNCTUATION.sub(r"\\\1", _AUTOLINK.sub(lambda m: m.group(0) + WORD_JOINER, str(value)))


def plot_text(value: Any) -> str:
    """`value` as plotly text that shows literally (plotly reads <a>, <b>, <br>, ... in its texts).
    Only &, < and > are escaped: plotly reads back &amp;, &lt; and &gt; but shows &quot; and
    &#x27; as written (html.escape's default), so quotes stay quotes."""
    return html.escape(str(value), quote=False)


def plot_lines(lines: Iterable[Any]) -> str:
    """Lines of plain text as one plotly text (a hover, an annotation): each escaped once, then
    joined by plotly's line break — escaping the joined text would show '<br>' as written."""
    return "<br>".join(plot_text(line) for line in lines)


def code(value: Any) -> str:
    """`value` as a Markdown code span (monospace, for column names): nothing inside a code span
    is Markdown; the fence is one backtick longer than any run of backticks in the text."""
    text = " ".join(str(value).splitlines()) or " "
    fence = "`" * (max((len(run) for run in re.findall("`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def neutral_cell(value: Any) -> Any:
    """A cell a spreadsheet will not run: text starting like a formula gets a leading `'`."""
    if isinstance(value, str) and value.startswith(FORMULA_START) and not _PLAIN_NUMBER.fullmatch(value):
        return "'" + value
    return value


def neutral_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with neutral column names and text cells; numeric columns unchanged."""
    out = frame.copy()
    out.columns = [neutral_cell(c) for c in frame.columns]
    for i in range(out.shape[1]):  # by position: column names may repeat
        column = out.iloc[:, i]
        if not (pd.api.types.is_numeric_dtype(column) or pd.api.types.is_bool_dtype(column)):
            out.isetitem(i, column.map(neutral_cell))
    return out


def csv_bytes(frame: pd.DataFrame) -> bytes:
    """The frame as UTF-8 CSV for a download, formula cells neutralised."""
    return neutral_frame(frame).to_csv(index=False).encode("utf-8")
