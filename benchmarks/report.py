"""latest.md: the report's tables, one per workload that ran, then the targets (every figure from latest.json)."""

from __future__ import annotations

from typing import Any

FLOOR = "floor: parallel ranged download, pyarrow read, parquet write (zstd level 3, as Iceberg's writer)"
BASELINE = "baseline (the reference: pyarrow read, PyIceberg append, row-filtered null scan, merge)"


def _stages(stages: dict[str, float] | None) -> str:
    return ", ".join(f"{k} {v}" for k, v in (stages or {}).items()) or "-"


def small_file(small: dict[str, Any]) -> list[str]:
    rows = [("service, pipeline called directly, rewrite path (`write: rewrite`)", "service_direct"),
            ("service, pipeline called directly, register path (`write: register`: footer, server-side copy, "
             "PyIceberg append committed to Nessie, no JVM)", "service_register"), (BASELINE, "baseline"),
            ("engine alone: plain Spark + Iceberg append to main, same session", "engine_alone"),
            ("service, event path (S3 -> SQS -> worker, 0.25 s window -> Lambda runtime, polled)",
             "service_event_path")]
    lines = [f"## 1. One small file ({small['rows']:,} rows) to main", "", f"Suite: {small['suite']}.", "",
             "| path | warm-up (s) | warm median (s) | samples (s) |", "|---|---|---|---|"]
    for label, key in rows:
        if key not in small:  # a result written before the register path
            continue
        way = small[key]
        lines.append(f"| {label} | {way['warmup_s']} | {way['warm']['median_s']} | "
                     f"{', '.join(map(str, way['warm']['samples_s']))} |")
    return [*lines, "", f"The event path's extra cost over the direct call (both rewrite): "
            f"{small['event_path_extra_s']} s. The service's median seconds per pipeline stage, rewrite path: "
            f"{_stages(small.get('service_stages_median_s'))}; register path: "
            f"{_stages(small.get('register_stages_median_s'))}.", ""]


def audit_cost(audit: dict[str, Any]) -> list[str]:
    lines = ["## 2. Audit of a 1,000-row append against table size", "",
             "| table rows | service audit, median (s) | baseline, the reference's row-filtered scan, median (s) |",
             "|---|---|---|"]
    for size in sorted(audit, key=int):
        lines.append(f"| {int(size):,} | {audit[size]['service_audit']['median_s']} | "
                     f"{audit[size]['baseline_reference_audit']['median_s']} |")
    return [*lines, ""]


def burst(found: dict[str, Any]) -> list[str]:
    lines = [f"## 3. Burst of {found['files']} small files for one table", "",
             "| concurrency | path | merges into main | seconds | files/min | service / baseline |",
             "|---|---|---|---|---|---|"]
    for concurrency, pair in found["by_concurrency"].items():
        s, b = pair["service_direct"], pair["baseline"]
        lines.append(f"| {concurrency} | service, direct (batches of {s['batch']}) | {s['merges']} | {s['seconds']} | "
                     f"{s['files_per_minute']} | {pair['ratio']} |")
        lines.append(f"| {concurrency} | baseline ({b['conflicts']} merge conflicts run again) | {b['merges']} | "
                     f"{b['seconds']} | {b['files_per_minute']} | |")
    e = found["service_event_path"]
    lines.append(f"| the stack's | service, event path | {e['merges']} | {e['seconds']} | {e['files_per_minute']} | |")
    return [*lines, ""]


def large_file(large: dict[str, Any]) -> list[str]:
    file = large["file"]
    lines = [f"## 4. One large file ({file['rows']:,} rows, {file['bytes'] / 2**20:.0f} MiB parquet, "
             f"{file.get('row_groups', '?')} row groups)", "",
             f"File: {file['source']}. Each run: a fresh table per way, one warm-up file into it first (untimed). "
             "Peak memory: the largest sum of resident memory over the process and its children (the Spark JVM "
             "included), sampled every 0.1 s.", "",
             "| path | median (s) | rows/s | peak memory (MiB) | median seconds per step |", "|---|---|---|---|---|"]
    first = large["service"]["runs"][0]
    service = (f"service, one-file path (Spark local[*], driver memory {first.get('driver_memory', '60%')} of "
               f"a {large['function_memory_mb']} MB function)")
    if first.get("in_process"):
        service = f"service, one-file path, in the bench's process (driver memory {first.get('driver_memory')})"
    floor = large["pyarrow_floor"]
    for name, label in (("service", f"{service}, rewrite path"), ("service_register", f"{service}, register path"),
                        ("baseline", BASELINE), ("pyarrow_floor", FLOOR)):
        if name not in large:  # a result written before the register path
            continue
        way = large[name]
        if way["rows_per_s"] is None:
            lines.append(f"| {label} | failed: {way['failed']} | - | {way['peak_tree_mib'] or '-'} (until then) | - |")
        else:
            lines.append(f"| {label} | {way['median_s']} | {way['rows_per_s']:,} | {way['peak_tree_mib'] or '-'} | "
                         f"{_stages(way.get('stages_median_s'))} |")
    lines += ["", f"The floor with snappy (pyarrow's default codec) instead: {floor.get('median_s_snappy')} s, "
              f"{floor.get('rows_per_s_snappy')} rows/s.", ""]
    measuring = large.get("measuring")
    if measuring:
        lines += [f"What measuring costs (the register path's pages decoded and measured, every claim checked, "
                  f"against the same pages decoded alone; the same local file, in the isolation worker, "
                  f"alternately): {measuring['decode_and_measure_median_s']} s against "
                  f"{measuring['decode_median_s']} s ({measuring['ratio']}x, +{measuring['measuring_s']} s). On "
                  f"the register path it runs beside the server-side copy.", ""]
    jobs = first.get("spark_jobs") or []
    if jobs and jobs[0].get("seconds") is not None:
        lines += ["The service's Spark jobs in its first run (longest first): " + "; ".join(
            f"{j['name']} {j['seconds']} s ({j['tasks']} tasks)" for j in jobs[:4]) + ".", ""]
    return lines


def gib_file(found: dict[str, Any]) -> list[str]:
    file = found["file"]
    lines = [f"## 7. A 1 GiB Parquet file ({file['rows']:,} rows, {file['bytes'] / 2**30:.2f} GiB, "
             f"{file.get('row_groups', '?')} row groups) to main in the function", "",
             f"File: {file['source']}. Each path once per run into a fresh table, after one warm-up file (untimed); "
             f"a {found['function_memory_mb']} MB function, its size threshold above the file.", "",
             "| path | median (s) | rows/s | peak memory (MiB) | median seconds per step |", "|---|---|---|---|---|"]
    for name in ("rewrite", "register"):
        way = found[name]
        if way["rows_per_s"] is None:
            lines.append(f"| {name} | failed: {way['failed']} | - | {way['peak_tree_mib'] or '-'} (until then) | - |")
        else:
            lines.append(f"| {name} | {way['median_s']} | {way['rows_per_s']:,} | {way['peak_tree_mib'] or '-'} | "
                         f"{_stages(way.get('stages_median_s'))} |")
    return [*lines, ""]


def emr_job(emr: dict[str, Any]) -> list[str]:
    return ["## 5. EMR job entry point under spark-submit (same file; its table registers it)", "",
            "| job | spark-submit wall (s) | rows/s | peak memory (MiB) |", "|---|---|---|---|",
            f"| {emr['master']}, driver {emr['driver_memory']} | "
            + (f"failed: {emr['failed']} | - | " if emr["rows_per_s"] is None else
               f"{emr['spark_submit_s']} | {emr['rows_per_s']:,} | ") + f"{emr['peak_tree_mib'] or '-'} |", ""]


def history(found: dict[str, Any]) -> list[str]:
    lines = ["## 6. Load cost against table history (the ingestion's snapshot trim, keep_snapshots 50)", "",
             "| loads behind | load median s | a fresh table's 10th, same moment | ratio | metadata bytes | snapshots "
             "| ledger lookup s |", "|---|---|---|---|---|---|---|"]
    for p in found["bounded"]["checkpoints"]:
        lines.append(f"| {p['loads']} | {p['load_median_s']} | {p['tenth_load_median_s']} | {p['vs_tenth']} | "
                     f"{p['metadata_bytes']} | {p['snapshots']} | {p['ledger_lookup_s']} |")
    if "compaction" in found:
        c = found["compaction"]
        before, after = c["report"]["before"], c["report"]["after"]
        lines += ["", f"Compaction of {c['files']} small files by `wap maintain` ({c['maintain_s']} s): data files "
                  f"{before['data_files']} -> {after['data_files']}, bytes {before['data_bytes']} -> "
                  f"{after['data_bytes']}, same rows and checksum: {c['same_rows']}, full scan "
                  f"{c['full_scan_before_s']} s -> {c['full_scan_after_s']} s."]
    return [*lines, ""]


SECTIONS = {"small_file": small_file, "audit_cost": audit_cost, "burst": burst, "large_file": large_file,
            "emr_job": emr_job, "history": history, "gib_file": gib_file}


def markdown(report: dict[str, Any]) -> str:
    lines = [f"# Benchmark results ({report['finished_at']})", "", f"Machine: {report['machine']}", ""]
    loads, when = report.get("workload_load_average", {}), report.get("workload_measured_at", {})
    for name, found in report["results"].items():
        if name in SECTIONS:
            lines += SECTIONS[name](found)
            if name in loads:  # the machine is shared: how loaded it was while this workload ran
                lines += [f"Measured {when.get(name, report['started_at'])}; load average (1 min) before and after: "
                          f"{', '.join(map(str, loads[name]))}.", ""]
    lines += ["## Targets", "", "| target | value | goal | met | from |", "|---|---|---|---|---|"]
    for t in report["targets"]:
        value = t["value"] if t["value"] is not None else "-"
        note = f" ({t['note']})" if t.get("note") else ""
        inputs = "; ".join(f"{k.removeprefix('results.')} = {v}" for k, v in t["inputs"].items())
        lines.append(f"| {t['name']} | {value} | {t['target']} | {'yes' if t['met'] else 'no'}{note} | "
                     f"{t['formula']}: {inputs or '-'} |")
    return "\n".join(lines) + "\n"
