"""`make outdated`: every pinned package and jar behind its latest release, from the registries these machines reach.

    python scripts/outdated.py [--json] [--all]

What it reads: the pins of requirements.txt (`name==version`; PyPI), the jar versions of docker/pom.xml (Maven
Central: the Iceberg runtime and AWS bundle, spark-avro, the Nessie server runner, ElasticMQ), package.json's
devDependencies (npm) and the Makefile's uv. Each registry's latest release is a stable one (PyPI's `info.version`,
Maven's `<release>`, npm's `latest` tag). A pin that a registry does not answer for is listed as `unknown`, never
dropped. `--all` lists the current pins too. Exit 0 either way: the list is where an upgrade starts, not a gate.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import urllib.request
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
POM_NS = {"m": "http://maven.apache.org/POM/4.0.0"}
PIN = re.compile(r"^([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?==([^\s#;]+)")
# The pom's jars: (group, artifact with ${...} placeholders, the property that holds its version).
JARS = (
    ("org.apache.iceberg", "iceberg-spark-runtime-${spark.binary}", "iceberg.version"),
    ("org.apache.iceberg", "iceberg-aws-bundle", "iceberg.version"),
    ("org.apache.spark", "spark-avro_${scala.binary}", "spark.version"),
    ("org.projectnessie.nessie", "nessie-quarkus", "nessie.version"),
    ("org.elasticmq", "elasticmq-server_2.13", "elasticmq.version"),
)


@dataclass(frozen=True)
class Pin:
    kind: str  # pypi | maven | npm
    name: str
    pinned: str
    where: str  # the file that pins it


@dataclass(frozen=True)
class Row:
    kind: str
    name: str
    pinned: str
    latest: str | None  # None: the registry did not answer
    where: str

    @property
    def behind(self) -> bool:
        return self.latest is not None and version_key(self.latest) > version_key(self.pinned)


def version_key(version: str) -> tuple[tuple[int, str], ...]:
    """Orders 1.10.0 after 1.9.2 and 2026.9.0 after 2025.10.0; a part that is not a number sorts by its text."""
    return tuple((int(part), "") if part.isdigit() else (-1, part) for part in re.split(r"[.+-]", version))


def python_pins(text: str, where: str = "requirements.txt") -> list[Pin]:
    found = []
    for line in text.splitlines():
        match = PIN.match(line.strip())
        if match:
            found.append(Pin("pypi", match.group(1), match.group(2), where))
    return found


def maven_pins(pom: str, where: str = "docker/pom.xml") -> list[Pin]:
    properties = {child.tag.split("}", 1)[1]: (child.text or "").strip()
                  for child in ET.fromstring(pom).find("m:properties", POM_NS) or []}

    def expand(text: str) -> str:
        return re.sub(r"\$\{([^}]+)\}", lambda m: properties[m.group(1)], text)

    return [Pin("maven", f"{group}:{expand(artifact)}", properties[version], where)
            for group, artifact, version in JARS if version in properties]


def npm_pins(package_json: str, where: str = "package.json") -> list[Pin]:
    dependencies = json.loads(package_json).get("devDependencies", {})
    return [Pin("npm", name, version.lstrip("^~="), where) for name, version in sorted(dependencies.items())]


def makefile_pins(makefile: str, where: str = "Makefile") -> list[Pin]:
    match = re.search(r"^UV_VERSION := (\S+)", makefile, re.M)
    return [Pin("pypi", "uv", match.group(1), where)] if match else []


def all_pins(root: Path = ROOT) -> list[Pin]:
    return (python_pins((root / "requirements.txt").read_text()) + maven_pins((root / "docker/pom.xml").read_text())
            + npm_pins((root / "package.json").read_text()) + makefile_pins((root / "Makefile").read_text()))


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=20) as answer:  # the fixed https registries above
        body: bytes = answer.read()
        return body


def latest_release(pin: Pin, get: Callable[[str], bytes] = _get) -> str | None:
    try:
        if pin.kind == "pypi":
            return str(json.loads(get(f"https://pypi.org/pypi/{pin.name}/json"))["info"]["version"])
        if pin.kind == "maven":
            group, artifact = pin.name.split(":")
            metadata = ET.fromstring(get(f"https://repo1.maven.org/maven2/{group.replace('.', '/')}/{artifact}/"
                                         "maven-metadata.xml"))
            release = metadata.findtext("versioning/release") or metadata.findtext("versioning/latest")
            return release.strip() if release else None
        if pin.kind == "npm":
            return str(json.loads(get(f"https://registry.npmjs.org/{pin.name}"))["dist-tags"]["latest"])
    except (OSError, ValueError, KeyError, ET.ParseError):
        return None
    return None


def report(pins: Iterable[Pin], get: Callable[[str], bytes] = _get) -> list[Row]:
    pins = list(pins)
    with ThreadPoolExecutor(max_workers=8) as pool:
        latest = list(pool.map(lambda pin: latest_release(pin, get), pins))
    return [Row(p.kind, p.name, p.pinned, found, p.where) for p, found in zip(pins, latest, strict=True)]


def table(rows: list[Row], everything: bool) -> str:
    shown = [r for r in rows if everything or r.behind or r.latest is None]
    if not shown:
        return f"All {len(rows)} pins are at their latest release."
    width = max(len(r.name) for r in shown)
    pinned = max(len("pinned"), *(len(r.pinned) for r in shown))
    newest = max(len("unknown"), *(len(r.latest or "") for r in shown))
    lines = [f"{'package':<{width}}  {'pinned':<{pinned}}  {'latest':<{newest}}  registry  file"]
    for r in shown:
        mark = "" if r.behind or r.latest is None else " (current)"
        lines.append(f"{r.name:<{width}}  {r.pinned:<{pinned}}  {r.latest or 'unknown':<{newest}}  {r.kind:<8}  "
                     f"{r.where}{mark}")
    behind = sum(r.behind for r in rows)
    unknown = sum(r.latest is None for r in rows)
    lines.append(f"{behind} of {len(rows)} pins behind their latest release; {unknown} unknown.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    parser.add_argument("--all", action="store_true", help="list the current pins too")
    args = parser.parse_args(argv)
    rows = report(all_pins())
    if args.json:
        print(json.dumps([asdict(r) | {"behind": r.behind} for r in rows], indent=2))
    else:
        print(table(rows, args.all))
    return 0


if __name__ == "__main__":
    sys.exit(main())
