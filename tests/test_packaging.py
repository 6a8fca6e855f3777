"""What a PyPI user installs: the data files the code reads, one version everywhere, the
license and project links; and, where scripts/test.sh installed the built wheel, that these
tests ran against that wheel rather than the checkout (so a file left out of it fails)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import zipfile
from importlib import metadata, resources
from pathlib import Path

import pytest

import relmerge
from relmerge.data import SAMPLE_FILES, sample_dir
from relmerge.decide.lexicon import _files as lexicon_files

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src" / "relmerge"
# Every file of the package that is not Python, relative to the package: what the code reads,
# and py.typed (empty), which tells type checkers the package is typed.
DATA_FILES = {
    "data/lexicon/en.toml",
    "data/lexicon/fr.toml",
    "data/lexicon/zh.toml",
    *(f"data/sample/{name}" for name in (*SAMPLE_FILES, "README.md")),
    "review/page.html",
    "report/page.css",
    "py.typed",
}
# scripts/test.sh sets these: it installs the built wheel, not the checkout, and says where
# the wheel and the sdist it built are.
FROM_WHEEL = os.environ.get("CI") == "true" or os.environ.get("RELMERGE_TEST_WHEEL") == "1"
DIST = os.environ.get("RELMERGE_DIST")


def test_the_data_files_the_code_reads_are_installed() -> None:
    package = resources.files("relmerge")
    assert package.joinpath("py.typed").is_file()
    for name in sorted(DATA_FILES - {"py.typed"}):
        assert package.joinpath(name).read_bytes().strip(), f"{name} is missing or empty"
    assert [name for name, _ in lexicon_files()] == ["en.toml", "fr.toml", "zh.toml"]
    assert sorted(p.name for p in sample_dir().iterdir()) == sorted([*SAMPLE_FILES, "README.md"])


@pytest.mark.skipif(not SRC.is_dir(), reason="no source tree next to the tests")
def test_every_non_python_file_of_the_source_tree_is_listed_and_installed() -> None:
    in_source = {
        path.relative_to(SRC).as_posix()
        for path in SRC.rglob("*")
        if path.is_file() and path.suffix not in {".py", ".pyc"} and "__pycache__" not in path.parts
    }
    # data/lexicon/README.md tells a contributor how to add words; nothing reads it.
    assert in_source - {"data/lexicon/README.md"} == DATA_FILES
    package = resources.files("relmerge")
    assert [name for name in sorted(in_source) if not package.joinpath(name).is_file()] == []


def test_the_version_is_the_distributions_and_the_cli_prints_it() -> None:
    assert relmerge.__version__ == metadata.version("relmerge")
    script = Path(sys.executable).with_name("relmerge")
    commands = [[sys.executable, "-m", "relmerge", "--version"], [str(script), "--version"]]
    for command in commands:
        done = subprocess.run(command, capture_output=True, text=True, check=True)
        assert done.stdout == f"relmerge, version {relmerge.__version__}\n"


def test_the_license_and_project_links_are_in_the_metadata() -> None:
    dist = metadata.distribution("relmerge")
    assert dist.metadata["License-Expression"] == "MIT"
    licenses = [f for f in dist.files or [] if f.parts[-2:] == ("licenses", "LICENSE")]
    assert len(licenses) == 1, "LICENSE is not in the distribution's dist-info/licenses/"
    text = licenses[0].read_text(encoding="utf-8")
    assert text.startswith("MIT License") and "Permission is hereby granted" in text
    urls = dict(u.split(", ", 1) for u in dist.metadata.get_all("Project-URL") or [])
    assert urls["Repository"] == "https://github.com/relmerge/relmerge"
    assert urls["Documentation"] == "https://relmerge.github.io/relmerge/"
    assert urls["Issues"] == "https://github.com/relmerge/relmerge/issues"
    assert urls["Changelog"].endswith("/relmerge/relmerge/blob/main/CHANGELOG.md")


@pytest.mark.skipif(not FROM_WHEEL, reason="scripts/test.sh and CI test the installed wheel")
def test_relmerge_is_imported_from_the_installed_wheel_not_the_checkout() -> None:
    location = Path(relmerge.__file__).resolve()
    assert "site-packages" in location.parts, location
    assert not location.is_relative_to(REPO / "src"), location
    direct_url = json.loads(metadata.distribution("relmerge").read_text("direct_url.json") or "{}")
    assert not direct_url.get("dir_info", {}).get("editable"), "an editable install"
    assert direct_url.get("url", "").endswith(".whl"), direct_url


@pytest.mark.skipif(not DIST, reason="RELMERGE_DIST: the folder scripts/test.sh built into")
def test_the_sdist_and_wheel_carry_the_project_files() -> None:
    dist = Path(str(DIST))
    version = relmerge.__version__
    with tarfile.open(dist / f"relmerge-{version}.tar.gz") as sdist:
        names = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    for name in ("LICENSE", "README.md", "CHANGELOG.md", "CONTRIBUTING.md", "SECURITY.md"):
        assert name in names, f"{name} is not in the sdist"
    assert {f"src/relmerge/{name}" for name in DATA_FILES} <= names
    with zipfile.ZipFile(dist / f"relmerge-{version}-py3-none-any.whl") as wheel:
        license_text = wheel.read(f"relmerge-{version}.dist-info/licenses/LICENSE")
        assert license_text == (REPO / "LICENSE").read_bytes() != b""
        assert {f"relmerge/{name}" for name in DATA_FILES} <= set(wheel.namelist())
