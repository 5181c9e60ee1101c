"""What every terminal renderer shares: the width, plain text out of rich, tables that fit.

* :func:`terminal_width`: the terminal's columns when stdout is one, else :data:`PIPE_WIDTH`
  (a file, a pipe, CI logs keep the full table, as before).
* :func:`text_console` / :func:`to_text`: rich renderables as plain text of a given width.
* :func:`fit_table`: a table whose columns are dropped, in the order the caller chose, until
  every remaining column fits ``width`` without cutting or breaking a word (text columns may
  wrap between words; numeric columns never wrap).
* :func:`plain`: a sentence for a person: the source tags (``[S1][S2]``) that the JSON and the
  docs keep are dropped.
* :func:`nothing_yet`: what an empty listing says (``results``, ``readers``): nothing yet, and the
  command that fills it.

    from cardbench.report.terminal import Col, fit_table, to_text
    table = fit_table([Col("Card", wrap=True), Col("Write (MB/s)", right=True, drop=2)], rows, width=80)
    print(to_text([table], width=80))
"""

from __future__ import annotations

import io
import re
import shutil
import sys
from dataclasses import dataclass
from typing import Iterable, Sequence

from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

#: width of tables when stdout is not a terminal: wide enough for the drawer table, so nothing
#: is cut to rich's 80-column default
PIPE_WIDTH = 150

#: a word longer than this (a long path, a serial) may be folded rather than drop columns for it
LONG_WORD = 32

_SOURCE_TAGS = re.compile(r"\s*(?:\[S\d+\])+")


def nothing_yet(what: str, fill: str) -> str:
    """What a listing says when the store holds nothing for it, in one wording for every command:
    nothing yet, and the command that fills it. ``what``: "No result stored"; ``fill``: the
    command and what it does, a sentence."""
    return f"{what} yet: nothing to show. {fill}"


def terminal_width(stream=None) -> int:
    """Columns of the terminal ``stream`` (default stdout) is; PIPE_WIDTH when it is no terminal."""
    stream = sys.stdout if stream is None else stream
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    if not tty:
        return PIPE_WIDTH
    return shutil.get_terminal_size((PIPE_WIDTH, 40)).columns


def plain(text: object) -> str:
    """``text`` without source tags: "how Kingston and Crucial define X [S1][S2][S5]" ->
    "how Kingston and Crucial define X"."""
    return _SOURCE_TAGS.sub("", str(text)).strip()


def text_console(width: int):
    """A rich console that records plain text (no colour, no markup highlighting) at ``width``."""
    return Console(file=io.StringIO(), width=width, record=True, color_system=None, force_terminal=False,
                   highlight=False)


def to_text(parts: Iterable[object], width: int) -> str:
    """Each part (a rich renderable, or a str printed as words that wrap at ``width``) as plain text."""
    console = text_console(width)
    for part in parts:
        if isinstance(part, str):
            console.print(part, markup=False)
        else:
            console.print(part)
    return "".join(line.rstrip() + "\n" for line in console.export_text(styles=False).splitlines())


@dataclass(frozen=True)
class Col:
    """One column of a :func:`fit_table`.

    ``drop``: the order in which columns go when the table is too wide (1 first); None: never.
    ``squeeze``: free text whose cells give way first when room is short.
    ``wrap``: the header and cells may wrap between words (never inside one: a figure such as
    "12.34" is one word); False: the column never wraps (its widest cell sets its width).
    """

    header: str
    right: bool = False
    wrap: bool = True
    drop: int | None = None
    squeeze: bool = False      # free text (notes): its cells wrap before headers and figures do


def _words(text: str, markup: bool) -> tuple[int, int]:
    """(widest line, longest word) of a cell, in terminal cells (markup removed when it is markup)."""
    lines = (Text.from_markup(text).plain if markup else text).splitlines() or [""]
    return (max(cell_len(x) for x in lines),
            max((cell_len(w) for x in lines for w in x.split()), default=0))


def _build(columns, keep, rows, styles, title, widths, table_kw, markup=False):
    table_kw = {"box": box.SIMPLE_HEAD, "show_edge": False, **table_kw}
    table = Table(title=Text(title) if title and not markup else title, title_justify="left", **table_kw)
    for i in keep:
        c = columns[i]
        table.add_column(c.header, justify="right" if c.right else "left", no_wrap=not c.wrap,
                         overflow="fold", width=widths.get(i) if widths else None)
    for n, row in enumerate(rows):
        table.add_row(*(row[i] if markup else Text(str(row[i])) for i in keep), style=styles[n] if styles else None)
    return table


def fit_table(columns: Sequence[Col], rows: Sequence[Sequence[str]], width: int, *, title: str | None = None,
              styles: Sequence[str | None] | None = None, markup: bool = False, **table_kw):
    """A rich Table of ``rows`` with the columns that fit ``width``.

    Cells are plain text (a reader named "[bold] reader" shows as such) unless ``markup``.

    A column with no cell filled is left out. Columns are dropped in their ``drop`` order until the narrowest the table can be (each
    wrapping column as narrow as its longest word, the others as wide as their widest cell) is
    at most ``width``; the room left is shared among the wrapping columns, so rich never has to
    break a word. The dropped headers are in ``table.dropped`` (a list), so a caller can say
    what it left out.
    """

    console = text_console(max(width, 1))
    if rows:    # a column with nothing in it says nothing: left out
        filled = [i for i in range(len(columns)) if any(str(r[i]).strip() for r in rows)]
        columns = [columns[i] for i in filled]
        rows = [[r[i] for i in filled] for r in rows]
    natural: dict[int, int] = {}
    least: dict[int, int] = {}
    cells: dict[int, int] = {}      # what the cells alone want (the header may wrap first)
    for i, c in enumerate(columns):
        sizes = [_words(c.header, True)] + [_words(str(row[i]), markup) for row in rows]
        natural[i] = max(1, max(s[0] for s in sizes))
        cells[i] = max([s[0] for s in sizes[1:]] + [1])
        # a word longer than LONG_WORD (a path) folds anyway: it does not get to drop columns
        least[i] = natural[i] if not c.wrap else max(1, min(LONG_WORD, max(s[1] for s in sizes)))
    keep = list(range(len(columns)))
    order = [i for _, i in sorted((c.drop, i) for i, c in enumerate(columns) if c.drop is not None)]
    while True:
        # what borders and padding take: the table with every column one cell wide, less those cells
        bare = _build(columns, keep, [], None, None, {i: 1 for i in keep}, table_kw)
        overhead = Measurement.get(console, console.options, bare).maximum - len(keep)
        if sum(least[i] for i in keep) + overhead <= width or not order:
            break
        keep.remove(order.pop(0))
    widths: dict[int, int] = {}
    if sum(least[i] for i in keep) + overhead > width:
        # still too wide with every droppable column gone: the widest wrapping columns give way
        # (their longest words fold, as nothing else can)
        widths = {i: least[i] for i in keep}
        excess = sum(widths.values()) + overhead - width
        flex = [i for i in keep if columns[i].wrap]
        while excess > 0 and flex:
            i = max(flex, key=lambda k: widths[k])
            if widths[i] <= 1:
                break
            widths[i] -= 1
            excess -= 1
    elif sum(natural[i] for i in keep) + overhead > width:
        widths = {i: least[i] for i in keep}
        room = width - overhead - sum(widths.values())
        # first the cells of the columns that hold figures on one line each (one cell at a time,
        # to the thirstiest column), then whole headers, the ones that need least first (so as
        # many as can be read on one line), then free text (``squeeze`` columns: notes)
        def grow(goal: dict[int, int], among: list[int]) -> None:
            nonlocal room
            wants = {i: goal[i] - widths[i] for i in among if goal[i] > widths[i]}
            while room > 0 and wants:
                i = max(wants, key=lambda k: (wants[k] / natural[k], wants[k]))
                widths[i] += 1
                room -= 1
                wants[i] -= 1
                if not wants[i]:
                    del wants[i]
        grow(cells, [i for i in keep if not columns[i].squeeze])
        for i in sorted((i for i in keep if natural[i] > widths[i] and not columns[i].squeeze),
                        key=lambda k: natural[k] - widths[k]):
            more = min(room, natural[i] - widths[i])
            widths[i] += more
            room -= more
        grow(natural, keep)
    table = _build(columns, keep, rows, styles, title, widths, table_kw, markup)
    table.dropped = [columns[i].header for i in range(len(columns)) if i not in keep]
    return table
