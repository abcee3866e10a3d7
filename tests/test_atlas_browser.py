"""The atlas page in a real browser: headless Chromium (the system's, driven by Playwright)
renders it with no network request and no console error, and a click on a layer x head cell
shows that head's attention map and numbers.

The page is built from a tiny local model; SINKSCOPE_ATLAS_PAGE=path checks another page too
(e.g. `sinkscope atlas smollm2-135m`'s). SINKSCOPE_SCREENSHOT=path also saves the screenshot
there (docs/images/atlas.png comes from SmolLM2's page)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

sync_api = pytest.importorskip(
    "playwright.sync_api", reason="Playwright is not installed (pip install -e '.[dev]')"
)
CHROMIUM = next(
    (p for p in (shutil.which("chromium"), shutil.which("chromium-browser")) if p), None
)
pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="no system Chromium (apt-get install -y chromium; .ci/run installs it when it can)",
)
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
MAX_BYTES = 10 * 2**20
CLICKED = (1, 2)  # the (layer, head) cell the test clicks (another if it is shown at start)


@pytest.fixture(scope="module")
def tiny_page(tiny_lm_folder, tmp_path_factory) -> Path:
    from sinkscope.cli import main

    out = tmp_path_factory.mktemp("atlas")
    args = ["atlas", str(tiny_lm_folder), "--out", str(out), "--inputs", "3", "--tokens", "24"]
    assert main(args) == 0
    return out / "atlas.html"


PAGES = ["tiny"] + (["given"] if os.environ.get("SINKSCOPE_ATLAS_PAGE") else [])


@pytest.fixture(params=PAGES)
def atlas_page(request, tiny_page) -> tuple[Path, bool]:
    """A page to check, and whether its screenshot goes to SINKSCOPE_SCREENSHOT (the last)."""
    path = tiny_page if request.param == "tiny" else Path(os.environ["SINKSCOPE_ATLAS_PAGE"])
    return path, request.param == PAGES[-1]


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield browser
        browser.close()


def _cell_position(page, div: str, layer: int, head: int) -> tuple[float, float]:
    """Page coordinates of the centre of cell (layer, head) of a Plotly heatmap."""
    return page.evaluate(
        """([div, layer, head]) => {
            const gd = document.getElementById(div);
            const box = gd.getBoundingClientRect();
            const xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis;
            return [box.left + xa._offset + xa.l2p(head), box.top + ya._offset + ya.l2p(layer)];
        }""",
        [div, layer, head],
    )


def _click_head(page, layer: int, head: int) -> None:
    """Click cell (layer, head) of the first grid; wait until the panel shows that head."""
    x, y = _cell_position(page, "grid-0-0", layer, head)
    page.mouse.click(x, y)
    page.wait_for_function(
        "([l, h]) => { const p = document.getElementById('panel-0');"
        " return p.dataset.layer == l && p.dataset.head == h; }",
        arg=[layer, head],
        timeout=10_000,
    )


def test_page_renders_offline_and_a_click_shows_the_head(browser, atlas_page, tmp_path):
    path, screenshot_wanted = atlas_page
    assert path.stat().st_size < MAX_BYTES, f"{path}: {path.stat().st_size} bytes"
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    requests, errors = [], []
    page.on("request", lambda request: requests.append(request.url))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    url = path.resolve().as_uri()
    page.goto(url)
    page.wait_for_selector("body[data-ready=true]", timeout=60_000)
    page.screenshot(path=tmp_path / "atlas.png")
    assert (tmp_path / "atlas.png").stat().st_size > 0
    if os.environ.get("SINKSCOPE_SCREENSHOT") and screenshot_wanted:
        page.screenshot(path=os.environ["SINKSCOPE_SCREENSHOT"])

    title = page.inner_text("#map-title-0")
    assert title.startswith("layer ") and "example sink" in title  # a head shown at start
    start = page.evaluate(
        "() => [document.getElementById('panel-0').dataset.layer,"
        " document.getElementById('panel-0').dataset.head].map(Number)"
    )
    layer, head = CLICKED if list(CLICKED) != start else (0, 0)  # not the head shown at start
    _click_head(page, layer, head)
    assert page.inner_text("#map-title-0").startswith(f"layer {layer}, head {head} ")
    shown = page.evaluate(
        "() => { const gd = document.getElementById('map-0');"
        " return [gd.data[0].z.length, gd.data[0].z[0].length]; }"
    )
    size = page.evaluate(
        "() => JSON.parse(document.getElementById('atlas-data').textContent).models[0].maps.size"
    )
    assert shown == [size, size]
    numbers = page.inner_text("#numbers-0")
    assert "first_share" in numbers and "sink_class" in numbers
    assert requests == [url], requests  # the page itself, nothing else
    assert errors == [], errors
    page.close()


def test_image_page_draws_the_example_image_and_its_sink(browser, timm_folder, tmp_path):
    from sinkscope.cli import main

    args = ["atlas", str(timm_folder), "--out", str(tmp_path), "--inputs", "2"]
    assert main(args) == 0
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto((tmp_path / "atlas.html").resolve().as_uri())
    page.wait_for_selector("body[data-ready=true]", timeout=60_000)
    model = page.evaluate(
        "() => JSON.parse(document.getElementById('atlas-data').textContent).models[0]"
    )
    patches = [i for i, label in enumerate(model["sink_labels"]) if label.startswith("(")]
    layer, head = divmod(patches[-1] if patches else 4, model["n_heads"])  # a patch sink if any
    _click_head(page, layer, head)
    drawn, outlined = page.evaluate(
        "() => { const gd = document.getElementById('image-0');"
        " return [gd.data[0].type, gd.layout.shapes.filter(s => s.type == 'rect').length]; }"
    )
    label = model["sink_labels"][layer * model["n_heads"] + head]
    assert drawn == "image" and outlined == int(label.startswith("("))  # a patch is outlined
    assert label in page.inner_text("#image-caption-0")
    assert f"example sink: {label}" in page.inner_text("#map-title-0")
    assert errors == [], errors
    page.close()
