"""The generated parts of the README, the docs and the report captions: each equals what its
source gives now (the exhibit registry, the claim catalogue, the exhibit modules' prose), and the
generator finds and rewrites a stale one."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace

import jinja2
import pytest

from sinkscope import docs
from sinkscope.catalogue import (
    THRESHOLD_HEADER,
    claim_table,
    ledger_table,
    load_claims,
    threshold_table,
)
from sinkscope.config import load_config
from sinkscope.exhibits import module
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


def _copy_generated(root: Path) -> None:
    for name in [*docs.GENERATED, *(f"workflow/report/{e}.rst" for e in EXHIBITS)]:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / name, root / name)


def test_a_stale_table_is_named_and_rewritten(tmp_path):
    _copy_generated(tmp_path)
    readme = tmp_path / "README.md"
    text = readme.read_text()
    readme.write_text(text.replace("| U2 | global broadcast |", "| U2 | a broadcast |"))
    assert docs.main([str(tmp_path), "--check"]) == 1
    assert docs.stale(tmp_path) == ["README.md"]
    assert docs.main([str(tmp_path)]) == 0
    assert readme.read_text() == text and docs.stale(tmp_path) == []


def test_an_edited_exhibit_section_or_caption_is_rewritten_from_its_module(tmp_path):
    _copy_generated(tmp_path)
    reference, caption = (
        tmp_path / "docs" / "exhibit-reference.md",
        tmp_path / "workflow" / "report" / "D2.rst",
    )
    texts = reference.read_text(), caption.read_text()
    reference.write_text(texts[0].replace("#### D2 — Oversmoothing", "#### D2 — Smoothing"))
    caption.unlink()
    assert docs.stale(tmp_path) == ["docs/exhibit-reference.md", "workflow/report/D2.rst"]
    docs.stale(tmp_path, write=True)
    assert (reference.read_text(), caption.read_text()) == texts


def test_an_exhibit_section_is_its_registry_title_prose_and_claim_table():
    sections = docs.exhibit_sections()
    d2 = sections[sections.index("#### D2 — ") : sections.index("#### D3 — ")]
    assert d2.startswith(f"#### D2 — O{EXHIBITS['D2'].title[1:]}\n\n")
    assert module("D2").REFERENCE.strip() in d2
    assert d2.rstrip().endswith(claim_table(load_claims(), "D2").rstrip())
    assert [line for line in sections.splitlines() if line.startswith("### ")] == [
        "### Unifying View (U1-U9)",
        "### StreamingLLM (S1-S9)",
        "### Sink vs diagonal (D1-D6)",
    ]
    assert module("D2").CAPTION.strip("\n") in docs.caption("D2")
    assert docs.caption("D2").endswith(docs.CLAIMS_STRIP + "\n")


def test_regenerated_replaces_a_table_to_its_last_row_and_a_part_to_its_end_marker():
    text = "intro\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\nafter\n"
    new = docs.regenerated(text, "| a | b |", None, "| a | b |\n|---|---|\n| 3 | 4 |\n")
    assert new == "intro\n\n| a | b |\n|---|---|\n| 3 | 4 |\n\nafter\n"
    text = "intro\n<!-- a -->\nold\n<!-- b -->\nafter\n"
    new = docs.regenerated(text, "<!-- a -->", "<!-- b -->", "<!-- a -->\nnew\n<!-- b -->\n")
    assert new == "intro\n<!-- a -->\nnew\n<!-- b -->\nafter\n"
    assert threshold_table(load_claims()).startswith(THRESHOLD_HEADER)


def test_a_file_without_its_generated_part_names_its_first_line(tmp_path):
    for name in docs.GENERATED:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("no table here\n")
    with pytest.raises(ValueError, match="README.md: no generated part starting with"):
        docs.stale(tmp_path)


@pytest.mark.parametrize(
    "scale", [[], ["smoke.yaml"], ["extended.yaml"], ["gpu.yaml"], ["paper.yaml"]]
)
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


def test_the_readme_says_what_every_verdict_says():
    """The README's table of verdicts is generated from the scorecard's, one row per verdict."""
    from sinkscope.scorecard import VERDICT_MEANINGS, VERDICTS, verdict_table

    assert tuple(VERDICT_MEANINGS) == VERDICTS
    table = verdict_table()
    assert table in (REPO / "README.md").read_text()
    rows = [row.split(" | ")[0].strip("| ") for row in table.splitlines()[2:]]
    assert rows == list(VERDICTS) and "not testable at this scale" in rows


def test_the_ledger_table_of_the_docs_is_the_catalogues():
    text = (REPO / "docs" / "exhibit-reference.md").read_text()
    assert ledger_table(load_claims()) in text
    changes = sum(len(claim.get("ledger") or []) for claim in load_claims())
    assert len(ledger_table(load_claims()).splitlines()) == changes + 2
