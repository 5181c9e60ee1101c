"""Reports: the drawer table (table | md | csv | json), one run in detail, comparisons, HTML.

    from cardbench.report import render, render_result
    print(render(results, "md", rate_unit="MB/s"))     # one row per result
    print(render_result(result))                        # every run, median, mean, spread, 95% CI
    from cardbench.report.html import render_html       # one self-contained HTML file with SVG charts
    from cardbench.report.compare import compare, render_compare
"""

from cardbench.report.compare import TestComparison, compare, render_compare
from cardbench.report.detail import render_result
from cardbench.report.drawer import (
           FORMATS,
           RESULTS_SCHEMA,
           DrawerRow,
           drawer_row,
           render,
           results_json,
)

__all__ = ["render", "render_result", "render_compare", "compare", "TestComparison", "DrawerRow", "drawer_row",
           "results_json", "FORMATS", "RESULTS_SCHEMA"]
