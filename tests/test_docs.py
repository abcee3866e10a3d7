"""The generated tables of the README and the docs: each equals what its source gives now (the
exhibit registry, the claim catalogue), and the generator finds and rewrites a stale one."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace

import jinja2
import pytest

from sinkscope import docs
from sinkscope.catalogue import THRESHOLD_HEADER, load_claims, threshold_table
from sinkscope.config import load_config
from sinkscope.exhibits.registry import EXHIBITS

REPO = Path(__file__).resolve().parents[1]


def test_the_generated_tables_of_the_checkout_are_current():
    assert docs.stale(REPO) == [], "regenerate them: python -m sinkscope.docs"


def test_the_exhibit_table_lists_every_exhibit_by_paper_with_its_module_rule_and_outputs():
    rows = docs.exhibit_table().splitlines()[2:]
    assert [row.split(" | ")[0].lstrip("| ") for row in rows][:3] == ["U1", "U2", "U3"]
    assert len(rows) == len(EXHIBITS)
    u9 = next(row for row in rows if row.startswith("| U9 |"))
    assert "[`exhibits/u9.py`](src/sinkscope/exhibits/u9.py) | `tables_U9` |" in u9
    assert u9.endswith(f"`results/U9/`: {', '.join(EXHIBITS['U9'].tables)}; `figures/U9.png` |")


def test_a_stale_table_is_named_and_rewritten(tmp_path):
    for name in docs.GENERATED:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / name, tmp_path / name)
    readme = tmp_path / "README.md"
    text = readme.read_text()
    readme.write_text(text.replace("| U2 | global broadcast |", "| U2 | a broadcast |"))
    assert docs.main([str(tmp_path), "--check"]) == 1
    assert docs.stale(tmp_path) == ["README.md"]
    assert docs.main([str(tmp_path)]) == 0
    assert readme.read_text() == text and docs.stale(tmp_path) == []


def test_regenerated_replaces_the_table_from_its_header_to_its_last_row():
    text = "intro\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\nafter\n"
    new = docs.regenerated(text, "| a | b |", "| a | b |\n|---|---|\n| 3 | 4 |\n")
    assert new == "intro\n\n| a | b |\n|---|---|\n| 3 | 4 |\n\nafter\n"
    assert threshold_table(load_claims()).startswith(THRESHOLD_HEADER)


def test_a_file_without_its_table_names_the_header(tmp_path):
    for name in docs.GENERATED:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("no table here\n")
    with pytest.raises(ValueError, match="README.md: no table starting with"):
        docs.stale(tmp_path)


@pytest.mark.parametrize("scale", [[], ["smoke.yaml"], ["extended.yaml"], ["paper.yaml"]])
def test_report_captions_render_the_settings_they_name_from_the_config(scale):
    """Snakemake renders each caption with Jinja2 (`snakemake.config` among its names): every
    setting a caption names exists at every scale, and U1's recipe is the config's."""
    config = load_config([REPO / "config" / "config.yaml", *(REPO / "config" / s for s in scale)])
    snakemake = SimpleNamespace(config=config)
    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    rendered = {
        path.stem: env.from_string(path.read_text()).render(snakemake=snakemake)
        for path in sorted((REPO / "workflow" / "report").glob("*.rst"))
    }
    train = config["toys"]["U1"]["train"]
    assert f"AdamW (lr {train['lr']}, weight decay\n{train['weight_decay']}" in rendered["U1"]
    sinks = ", ".join(map(str, config["streaming"]["ppl"]["sinks"]))
    assert f"Perplexity with\n{sinks} initial tokens" in rendered["S4"]
    assert not any("{{" in text for text in rendered.values())
