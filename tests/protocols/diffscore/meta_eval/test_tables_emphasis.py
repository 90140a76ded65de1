"""The paper's emphasis in the meta-evaluation tables: best per column bold, second underlined (Markdown, HTML)."""

import numpy as np
import pandas as pd


def _wide():
    w = pd.DataFrame(
        {"A (rho)": [0.30, 0.50, 0.40, np.nan], "B (rho)": [0.1, 0.1, 0.2, 0.0]},
        index=pd.Index(["m1", "m2", "m3", "UniEval (absent: not run)"], name="metric"),
    )
    return w


def test_markdown_bold_best_underline_second():
    from dlmeval.protocols.diffscore.meta_eval.tables import markdown_table

    lines = markdown_table(_wide()).splitlines()
    assert lines[2] == "| m1 | 0.300 | <u>0.100</u> |"  # B: 0.2 best, the two 0.1 tie for second
    assert lines[3] == "| m2 | **0.500** | <u>0.100</u> |"
    assert lines[4] == "| m3 | <u>0.400</u> | **0.200** |"
    assert lines[5] == "| UniEval (absent: not run) |  | 0.000 |"
    assert "**" not in markdown_table(_wide(), emphasis=False)


def test_html_underlines_second_when_asked():
    from dlmeval.report.fmt import TableView, table_html

    df = _wide().reset_index()
    view = TableView(df, best={"A (rho)": "max"}, underline_second=True)
    html = table_html(view)
    assert "<strong>0.500</strong>" in html and "<u>0.400</u>" in html and "<u>0.300</u>" not in html
    assert "<u>" not in table_html(TableView(df, best={"A (rho)": "max"}))
