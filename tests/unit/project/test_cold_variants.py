"""benchmarks/cold_start.py's variants: a --java-options variant adds its flags after the service's own (a later
HotSpot flag wins), on the register path, or on the rewrite path when its name starts with `rewrite`."""

from __future__ import annotations

from benchmarks.cold_start import variants_from


def test_a_java_options_variant_follows_the_services_flags_on_the_path_its_name_says() -> None:
    found = variants_from(["rewrite"], ["rewrite-c2=-XX:TieredStopAtLevel=4", "c2=-XX:TieredStopAtLevel=4"])
    assert list(found) == ["rewrite", "rewrite-c2", "c2"]
    for name in ("rewrite-c2", "c2"):
        options = found[name]["java_options"]
        assert options[-1] == "-XX:TieredStopAtLevel=4" and "-XX:TieredStopAtLevel=1" in options[:-1]
    assert found["rewrite-c2"]["env"] == found["rewrite"]["env"] and "WAP_AUDITS_FILE" in found["rewrite"]["env"]
    assert "env" not in found["c2"]  # the register path, as `after`
