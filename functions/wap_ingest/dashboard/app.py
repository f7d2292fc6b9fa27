"""The quality dashboard page: `wap dashboard` runs it (`streamlit run` on 127.0.0.1).

Everything it shows comes from dashboard/data.py (PyIceberg, Nessie's REST API, the decision log: no JVM);
this file only lays it out. `?table=<namespace>.<table>` in the URL selects a table. Actions are not buttons:
each open branch shows the `wap` commands to paste, so every decision is made and recorded by the CLI.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import altair as alt
import pandas as pd
import streamlit as st

from wap_ingest.bootstrap.config import Settings
from wap_ingest.core.errors import WapError
from wap_ingest.dashboard.data import BranchView, Sources, TableView, sources_for, table_list, table_view
from wap_ingest.dashboard.metrics import PUBLISHED, PUBLISHED_FAILED, REJECTED, MetricSeries

CACHE_SECONDS = 30
_MARKDOWN_STARTS = (">", "-", "+", "*", "#", "|")


def _cell(value: object) -> str:
    """A table cell as text: st.table renders cells as Markdown, so `>= 1` would become a quote, `-` a list."""
    text = "" if value is None else str(value)
    return "\\" + text if text.startswith(_MARKDOWN_STARTS) else text


@st.cache_resource
def _sources() -> Sources:
    return sources_for(Settings.from_env())


@st.cache_data(ttl=CACHE_SECONDS, show_spinner=False)
def _tables(_sources: Sources) -> list[tuple[str, int]]:
    return [(table.qualified, count) for table, count in table_list(_sources)]


@st.cache_data(ttl=CACHE_SECONDS, show_spinner="Reading the table's metadata ...")
def _view(_sources: Sources, table: str) -> TableView:
    namespace, name = table.split(".", 1)
    from wap_ingest.core.models import TableRef

    return table_view(_sources, TableRef(namespace, name))


def _branch(branch: BranchView) -> None:
    status = f"{len(branch.failed)} failed check(s)" if branch.failed else "passes its audit now"
    st.markdown(f"#### `{branch.name}`")
    st.caption(f"{branch.rows_added} new rows from {branch.source or 'an unknown source'}, opened {branch.age} ago: "
               f"{status}")
    left, right = st.columns(2)
    with left:
        st.markdown("**Audit (on the branch's new rows)**")
        st.table(pd.DataFrame([{"check": f"{c.check}({c.target})", "status": c.status.value,
                                "measured": _cell(c.measured), "expected": _cell(c.expected)}
                               for c in branch.report.checks]))
    with right:
        st.markdown("**Nulls per column: the branch's new rows vs main**")
        st.table(pd.DataFrame([{"column": n.column, "nulls in new rows": str(n.branch_nulls),
                                "nulls on main": _cell(n.main_nulls)}
                               for n in branch.nulls]))
    st.markdown("**Commands** (paste into a shell with the service's environment)")
    st.code("\n".join(f"# {label}\n{command}" for label, command in branch.commands), language="bash")


def _loads(view: TableView) -> Any:
    return pd.DataFrame([{"time (UTC)": load.at.strftime("%Y-%m-%d %H:%M:%S"), "outcome": load.outcome,
                          "source": _cell(load.source), "rows": _cell(load.rows), "audit": _cell(load.audit),
                          "branch": _cell(load.branch), "by": _cell(load.by), "reason": _cell(load.reason)}
                         for load in view.loads])


def _rows_chart(view: TableView) -> alt.Chart:
    """A step line with a point per snapshot: the rows only change when a load is published."""
    points = [*view.rows_over_time, (datetime.now(UTC), view.rows_over_time[-1][1])]  # the line runs up to now
    frame = pd.DataFrame({"time": [t for t, _ in points], "rows": [n for _, n in points]})
    chart: alt.Chart = (alt.Chart(frame).mark_line(point=True, interpolate="step-after")
                        .encode(x=alt.X("time:T", title="committed (UTC)"), y=alt.Y("rows:Q", title="rows on main"),
                                tooltip=["time:T", "rows:Q"]).properties(height=260))
    return chart


STATE_COLOURS = {PUBLISHED: "#4c78a8", PUBLISHED_FAILED: "#f58518", REJECTED: "#e45756"}
SHOWN_METRICS = 8


def _metric_chart(series: MetricSeries) -> alt.LayerChart:
    """The metric per load: the published loads' line, every load a point coloured by its fate (a rejected load in
    red), and the band the anomaly check expects the next value in (shaded)."""
    frame = pd.DataFrame({"time": [p.at for p in series.points], "value": [p.value for p in series.points],
                          "load": [p.load for p in series.points], "state": [p.state for p in series.points]})
    x, y = alt.X("time:T", title="audited (UTC)"), alt.Y("value:Q", title=series.metric)
    line = alt.Chart(frame[frame["state"] != REJECTED]).mark_line().encode(x=x, y=y)
    points = alt.Chart(frame).mark_point(filled=True, size=70).encode(
        x=x, y=y, color=alt.Color("state:N", title="load", scale=alt.Scale(domain=list(STATE_COLOURS),
                                                                          range=list(STATE_COLOURS.values()))),
        tooltip=["time:T", "value:Q", "state:N", "load:N"])
    layers: list[Any] = [line, points]
    if series.band is not None:
        low, high = series.band
        shade = alt.Chart(pd.DataFrame({"low": [low], "high": [high]})).mark_rect(opacity=0.15, color="#54a24b")
        layers.insert(0, shade.encode(y="low:Q", y2="high:Q"))
    return alt.LayerChart(layer=layers, height=220, title=series.metric, padding={"top": 14, "left": 5, "right": 5,
                                                                                   "bottom": 5})


def _metrics(view: TableView) -> None:
    st.subheader("Audit metrics over loads")
    if not view.metrics:
        st.caption("No audit results yet: each audited load adds its measurements to "
                   f"wap_meta.{view.table.replace('.', '__')}.")
        return
    st.caption(f"From wap_meta.{view.table.replace('.', '__')}: each load's metrics; shaded, the band the table's "
               "anomaly check expects the next load in; red, a rejected load waiting on its branch.")
    for series in view.metrics[:SHOWN_METRICS]:
        st.altair_chart(_metric_chart(series), width="stretch")
        notes = [series.rule or "no anomaly check on this metric"]
        if series.failed:
            notes.append(f"{series.failed} of these loads failed their audit")
        st.caption("; ".join(notes))


def main() -> None:
    st.set_page_config(page_title="wap-lake data quality", layout="wide")
    st.title("wap-lake data quality")
    try:
        sources = _sources()
        tables = _tables(sources)
    except WapError as exc:
        st.error(f"Cannot read the lake: {exc}")
        return
    if not tables:
        st.info("No tables yet: drop a file into the source bucket (e.g. `python data_loader.py`).")
        return
    names = [name for name, _ in tables]
    wanted = st.query_params.get("table")
    with st.sidebar:
        st.header("Tables")
        choice = st.radio("Table", names, index=names.index(wanted) if wanted in names else 0,
                          format_func=lambda n: f"{n} ({dict(tables)[n]} open)" if dict(tables)[n] else n)
        if st.button("Refresh"):
            st.cache_data.clear()
    st.query_params["table"] = choice
    try:
        view = _view(sources, choice)
    except WapError as exc:
        st.error(f"Cannot read {choice}: {exc}")
        return
    st.header(view.table)
    rows, opened, failing = st.columns(3)
    rows.metric("Rows on main", "-" if view.rows_on_main is None else f"{view.rows_on_main:,}")
    opened.metric("Open branches", len(view.branches))
    failing.metric("Open branches failing their audit", sum(1 for b in view.branches if b.failed))
    st.subheader("Rows on main over time")
    if view.rows_over_time:
        st.altair_chart(_rows_chart(view), width="stretch")
    else:
        st.caption("The table is not on main yet.")
    _metrics(view)
    st.subheader("Latest loads")
    st.table(_loads(view))
    st.subheader(f"Open branches ({len(view.branches)})")
    if not view.branches:
        st.caption("None: every load of this table was published or discarded.")
    for branch in view.branches:
        _branch(branch)


main()
