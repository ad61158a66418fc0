"""The cluster page's cost table (fedkd_core.costs): what each profile's grid has cost, from the
records filed under it, never typed."""

import json
import re
from pathlib import Path

import pytest

from fedkd_core import costs
from fedkd_core.chapters.card import PARAMS
from fedkd_core.results import Divergence, RecordError, config_hash, save_divergence, stored_paths
from fedkd_core.sweep import load_grid

ROOT = Path(__file__).resolve().parents[1]
GRID = PARAMS / "paper" / "knfu_fedmd_original.yaml"  # 36 runs, all committed


def test_the_table_counts_a_grids_records_and_sums_their_hours_per_machine(tmp_path):
    _, configs = load_grid("knfu", GRID)
    timed = (("AMD EPYC (family 25 model 17, AVX512-BF16)", 1800), ("AMD EPYC (family 25 model 17, AVX512-BF16)", 5400),
             ("NVIDIA H200", 720))
    for config, (device, seconds) in zip(configs, timed):
        source = next(p for p in stored_paths(config, root=ROOT / "results") if p.parent.parent.name == "paper")
        record = json.loads(source.read_text())
        record["environment"]["device_name"], record["timings"]["total_seconds"] = device, seconds
        target = tmp_path / "paper" / source.parent.name / source.name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(record))
    for config, profile in ((configs[3], "paper"), (configs[4], "reduced")):  # the second is another profile's
        save_divergence(Divergence(config=config.resolved(), key=config_hash(config), round=2, error="non-finite loss",
                                   history=[], timings={"total_seconds": 360.0}, profile=profile,
                                   environment={"device_name": "AMD EPYC (family 25 model 17, AVX512-BF16)"}), tmp_path)
    table = costs.cost_table([GRID], results=tmp_path)
    assert table.to_dict("records") == [{"profile yaml": "paper/knfu_fedmd_original.yaml",
                                         "runs finished": f"4 of {len(configs) - 1} runs (1 diverged)",
                                         "measured": "3 runs, 2.1 h on AMD EPYC Zen 4; 1 run, 0.2 h on NVIDIA H200"}]
    assert ("| `paper/knfu_fedmd_original.yaml` | 4 of 35 runs (1 diverged) | 3 runs, 2.1 h on AMD EPYC Zen 4; "
            "1 run, 0.2 h on NVIDIA H200 |") in costs.markdown(table)
    empty = costs.cost_table([GRID], results=tmp_path / "none")
    assert "| 0 of 36 runs | none yet |" in costs.markdown(empty)


def test_an_unreadable_record_stops_the_table_instead_of_dropping_its_row(tmp_path):
    _, configs = load_grid("knfu", GRID)
    source = next(p for p in stored_paths(configs[0], root=ROOT / "results") if p.parent.parent.name == "paper")
    target = tmp_path / "paper" / source.parent.name / source.name
    target.parent.mkdir(parents=True)
    target.write_text("{truncated")
    with pytest.raises(RecordError, match="cannot be read"):
        costs.cost_table([GRID], results=tmp_path)


def test_every_measured_profile_yaml_is_listed_and_a_template_is_left_out():
    found = {p.relative_to(PARAMS).as_posix() for p in costs.profile_yamls()}
    assert {"paper/fedckd_fmnist100.yaml", "reduced/redesign/fedgmkd.yaml", "tuning/knfu.yaml",
            "robustness/knfu.yaml"} <= found
    assert not any(p.startswith(("quick/", "smoke/")) for p in found)
    template = PARAMS / "paper" / "add_your_method.yaml"
    assert costs.cost_table([template]).empty


def test_the_cluster_page_includes_the_table_and_types_no_measured_hours():
    text = (ROOT / "book" / "cluster.md").read_text()
    assert "{include} _generated/costs.md" in text
    typed = re.findall(r"\b\d[\d,.]*\s*h on\b", text)
    assert not typed, f"measured hours on the cluster page must come from the records: {typed}"
