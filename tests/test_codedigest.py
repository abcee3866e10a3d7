"""The code digest: what reruns a job and names a checkpoint is the code a job runs."""

from __future__ import annotations

import pytest

from sinkscope import codedigest

MODULE = "sinkscope.exhibits.d2"


@pytest.fixture
def edit(tmp_path, monkeypatch):
    """Digest of MODULE's exhibit with its source rewritten by `change`."""
    real = codedigest._module_file
    source = real(MODULE).read_text()

    def digest(change) -> str:
        edited = tmp_path / f"edit{len(list(tmp_path.iterdir()))}.py"
        edited.write_text(change(source))
        monkeypatch.setattr(
            codedigest, "_module_file", lambda name: edited if name == MODULE else real(name)
        )
        return codedigest.code_digest(MODULE)

    return digest


def test_prose_docstrings_and_comments_rerun_nothing(edit):
    unchanged = edit(lambda source: source)
    assert (
        edit(lambda source: source.replace('REFERENCE = r"""', 'REFERENCE = r"""Edited. '))
        == unchanged
    )
    assert (
        edit(lambda source: source.replace('CAPTION = r"""', 'CAPTION = r"""Edited. ')) == unchanged
    )
    assert edit(lambda source: source.replace('"""', '"""Edited. ', 1)) == unchanged
    assert edit(lambda source: source + "\n# a comment\n") == unchanged


def test_a_code_edit_changes_the_digest(edit):
    unchanged = edit(lambda source: source)
    assert edit(lambda source: source + "\nEDITED = 1\n") != unchanged
    assert (
        edit(lambda source: source.replace("def ", "def _edited(): pass\n\n\ndef ", 1)) != unchanged
    )


@pytest.mark.parametrize(
    ("module", "runs"),
    [
        ("sinkscope.provenance.png", True),
        ("sinkscope.provenance.seal", True),
        ("sinkscope.files", True),
        ("sinkscope.exhibits.d2", False),
    ],
)
def test_the_digest_follows_a_package_into_its_modules(tmp_path, monkeypatch, module, runs):
    """A script that imports a name of the provenance package runs the package's modules and
    what they import: a code edit of any of them changes the script's digest, of another
    module not."""
    script = tmp_path / "figure_script.py"
    script.write_text("from sinkscope.provenance import save_figure\n")
    real = codedigest._module_file
    before = codedigest.code_digest(scripts=(script,))
    edited = tmp_path / "edited.py"
    edited.write_text(f"{real(module).read_text()}\nEDITED = 1\n")
    monkeypatch.setattr(
        codedigest, "_module_file", lambda name: edited if name == module else real(name)
    )
    assert (codedigest.code_digest(scripts=(script,)) != before) == runs
