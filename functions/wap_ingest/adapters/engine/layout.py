"""A table's layout (core.layout) applied through Iceberg's Java API on the table as the branch sees it: the partition
spec, the sort order and the write properties. On a new table before its first rows are written; on an existing one
as evolution on the run's branch (old data files keep their spec; new ones get the new one), merged with the file.
Returns what changed, for the log."""

from __future__ import annotations

from typing import Any

from wap_ingest.core.layout import Layout, PartitionField


def _term(jvm: Any, field: PartitionField) -> Any:
    expressions = jvm.org.apache.iceberg.expressions.Expressions
    if field.transform == "identity":
        return expressions.ref(field.column)
    if field.transform in ("bucket", "truncate"):
        return getattr(expressions, field.transform)(field.column, field.width)
    return getattr(expressions, field.transform)(field.column)


def current_partition(table: Any) -> list[tuple[str, str, str]]:
    """(column, Iceberg transform, field name) of the table's current spec; void fields (dropped ones) left out."""
    schema = table.schema()
    found = []
    for field in table.spec().fields():
        transform = str(field.transform())
        if transform != "void":
            found.append((str(schema.findColumnName(field.sourceId())), transform, str(field.name())))
    return found


def current_sort(table: Any) -> list[tuple[str, bool]]:
    schema = table.schema()
    fields = table.sortOrder().fields()
    return [(str(schema.findColumnName(f.sourceId())), str(f.direction()) == "DESC") for f in fields]


def apply_layout(jvm: Any, table: Any, layout: Layout) -> list[str]:
    changes: list[str] = []
    wanted = [(f.column, f.iceberg) for f in layout.partition]
    have = current_partition(table)
    if [(c, t) for c, t, _ in have] != wanted:
        update = table.updateSpec()
        for column, transform, name in have:
            if (column, transform) not in wanted:
                update = update.removeField(name)
        for field in layout.partition:
            if (field.column, field.iceberg) not in [(c, t) for c, t, _ in have]:
                update = update.addField(_term(jvm, field))
        update.commit()
        changes.append("partition spec: " + (", ".join(f"{t}({c})" for c, t in wanted) or "unpartitioned"))
    sort = [(f.column, f.descending) for f in layout.sort]
    if current_sort(table) != sort:
        order, iceberg = table.replaceSortOrder(), jvm.org.apache.iceberg
        for column, descending in sort:  # Iceberg's defaults: ascending nulls first, descending nulls last
            term = iceberg.expressions.Expressions.ref(column)
            order = order.desc(term, iceberg.NullOrder.NULLS_LAST) if descending else order.asc(
                term, iceberg.NullOrder.NULLS_FIRST)
        order.commit()
        changes.append("sort order: " + (", ".join(f"{c} {'desc' if d else 'asc'}" for c, d in sort) or "none"))
    properties = table.properties()
    differing = [(k, v) for k, v in layout.properties if properties.get(k) != v]
    if differing:
        update = table.updateProperties()
        for key, value in differing:
            update = update.set(key, value)
        update.commit()
        changes.append("properties: " + ", ".join(f"{k}={v}" for k, v in differing))
    return changes
