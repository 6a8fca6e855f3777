"""The README and the documentation site: what CI's strict MkDocs build cannot see.

The README is also the PyPI page, where relative links lead nowhere, so every link must be
absolute; the site's pages must all be in the nav; the generated reference pages must be
filled by the build hook; and every bench script the docs name must exist. None of this
needs MkDocs or the network.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
MKDOCS = ROOT / "mkdocs.yml"
README = ROOT / "README.md"
SITE = "https://relmerge.github.io/relmerge/"
REPOSITORY = "https://github.com/relmerge/relmerge/"

# Markdown links and images, autolinks, reference definitions and HTML attributes.
LINK_PATTERNS = (
    re.compile(r"\]\(\s*<?([^)\s>]+)"),
    re.compile(r"<((?:[a-z][a-z0-9+.-]*:|/|\.)[^>\s]*)>"),
    re.compile(r"^\s*\[[^\]]+\]:\s*<?(\S+?)>?\s*$", re.MULTILINE),
    re.compile(r"""(?:href|src)\s*=\s*["']([^"']+)"""),
)


def links(markdown: str) -> list[str]:
    """Every link target in ``markdown``, code blocks and code spans left out."""
    text = re.sub(r"```.*?```", "", markdown, flags=re.DOTALL)
    text = re.sub(r"`[^`\n]*`", "", text)
    return [match for pattern in LINK_PATTERNS for match in pattern.findall(text)]


def load_hooks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_hooks", DOCS / "hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def site_pages() -> list[str]:
    """Every Markdown page of the site, relative to docs/."""
    return sorted(str(path.relative_to(DOCS)) for path in DOCS.rglob("*.md"))


def test_readme_is_short() -> None:
    assert len(README.read_text(encoding="utf-8").splitlines()) < 250


def test_readme_links_are_absolute() -> None:
    found = links(README.read_text(encoding="utf-8"))
    assert found, "the link pattern found nothing: is it broken?"
    relative = [target for target in found if not target.startswith("https://")]
    assert not relative, f"relative links in README.md (PyPI cannot follow them): {relative}"


def test_readme_links_point_at_the_site_or_the_repository_on_main() -> None:
    for target in links(README.read_text(encoding="utf-8")):
        if target.startswith(SITE):
            page = target.removeprefix(SITE)
            assert page == "" or page.endswith("/"), f"site links end with a slash: {target}"
        elif target.startswith(REPOSITORY):
            path = re.sub(r"^(?:blob|tree)/main/", "", target.removeprefix(REPOSITORY))
            assert path != target.removeprefix(REPOSITORY), f"not on main: {target}"


def test_readme_site_links_name_pages_that_exist() -> None:
    pages = {
        ("" if page == "index.md" else page.removesuffix("index.md").removesuffix(".md") + "/")
        .replace("//", "/")
        .lstrip("/")
        for page in site_pages()
    }
    for target in links(README.read_text(encoding="utf-8")):
        if target.startswith(SITE):
            assert target.removeprefix(SITE).split("#")[0] in pages, f"no such page: {target}"


def test_readme_needs_nothing_outside_the_repository() -> None:
    assert "shared/data" not in README.read_text(encoding="utf-8")


def test_links_to_repository_files_name_files_that_exist() -> None:
    """``blob/main/PATH`` links, in the README and the site, name files of this checkout
    (the project files another change adds are allowed to be missing here)."""
    added_elsewhere = {"CHANGELOG.md", "CONTRIBUTING.md", "SECURITY.md"}
    texts = [README.read_text(encoding="utf-8"), MKDOCS.read_text(encoding="utf-8")]
    texts += [(DOCS / page).read_text(encoding="utf-8") for page in site_pages()]
    for text in texts:
        for path in re.findall(re.escape(REPOSITORY) + r"(?:blob|tree)/main/([^)\s>#\"']+)", text):
            if path not in added_elsewhere:
                assert (ROOT / path).exists(), f"link to a file that is not there: {path}"


def test_mkdocs_builds_strictly_with_link_validation() -> None:
    config = MKDOCS.read_text(encoding="utf-8")
    assert re.search(r"^strict: true$", config, re.MULTILINE)
    assert re.search(r"^docs_dir: docs$", config, re.MULTILINE)
    for setting in ("not_found: warn", "anchors: warn", "omitted_files: warn"):
        assert setting in config, f"mkdocs.yml validation lacks {setting}"
    assert re.search(r"^hooks:\n  - docs/hooks\.py$", config, re.MULTILINE)


def test_every_page_is_in_the_nav_and_every_nav_page_exists() -> None:
    config = MKDOCS.read_text(encoding="utf-8")
    nav = config.split("\nnav:\n", 1)[1]
    # Pages of the site only: "Title: path.md" (links to the repository are "Title: https://…").
    in_nav = set(re.findall(r":\s+([\w./-]+\.md)\s*$", nav, re.MULTILINE))
    pages = set(site_pages())
    assert pages - in_nav == set(), "pages missing from the nav in mkdocs.yml"
    assert in_nav - pages == set(), "nav entries with no page under docs/"


def test_the_hook_fills_every_generated_page() -> None:
    hooks = load_hooks()
    used: set[str] = set()
    for page in site_pages():
        markdown = (DOCS / page).read_text(encoding="utf-8")
        markers = [marker for marker in hooks.GENERATED if marker in markdown]
        used.update(markers)
        filled = hooks.on_page_markdown(markdown, page=None, config=None, files=None)
        assert "<!-- generated:" not in filled, page
    assert used == set(hooks.GENERATED), "a generator whose marker is on no page"
    cli = hooks.fill((DOCS / "reference" / "cli.md").read_text(encoding="utf-8"))
    assert "## relmerge run\n" in cli and "Usage: relmerge run " in cli
    config = hooks.fill((DOCS / "reference" / "configuration.md").read_text(encoding="utf-8"))
    assert "| `auto_merge_cosine`<br>" in config and "| `startup_wait`<br>" in config


@pytest.mark.parametrize(
    ("html", "shown"),
    [
        (":class:<code>~relmerge.errors.ProviderError</code>", "<code>ProviderError</code>"),
        (":func:<code>relmerge.decide.run</code>", "<code>relmerge.decide.run</code>"),
        ("<code>plain</code>", "<code>plain</code>"),
    ],
)
def test_the_hook_shows_sphinx_roles_as_names(html: str, shown: str) -> None:
    assert load_hooks().on_page_content(html, page=None, config=None, files=None) == shown


def test_every_bench_script_the_docs_name_exists() -> None:
    """A figure is only stated with the command that prints it: that command must exist."""
    texts = [README.read_text(encoding="utf-8")]
    texts += [(DOCS / page).read_text(encoding="utf-8") for page in site_pages()]
    named = {path for text in texts for path in re.findall(r"\bbench/[\w/.-]+\.(?:py|sh)", text)}
    assert named, "no bench script named: is the pattern broken?"
    missing = sorted(path for path in named if not (ROOT / path).is_file())
    assert not missing, f"the docs name bench scripts that do not exist: {missing}"


def test_ci_builds_the_site_strictly_and_loudly() -> None:
    """``mkdocs build --quiet`` silences the warnings that ``--strict`` fails on."""
    script = (ROOT / "scripts" / "test.sh").read_text(encoding="utf-8")
    builds = [line for line in script.splitlines() if "mkdocs build" in line]
    assert builds, "scripts/test.sh does not build the site"
    for line in builds:
        assert "--strict" in line and "--quiet" not in line and " -q" not in line, line
    assert re.search(r"pip install .*(\.|relmerge)\[[^\]]*\bdocs\b", script), "no docs extra"


def test_doctests_in_docstrings_become_code_blocks() -> None:
    """The API reference shows a docstring's ``>>>`` example as code, not as a quote."""
    pytest.importorskip("griffe")  # the docs extra; the extension runs inside mkdocstrings
    spec = importlib.util.spec_from_file_location("griffe_doctests", DOCS / "griffe_doctests.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    docstring = "Config of the step::\n\n    code\n\n>>> 1 + 1\n2\n>>> x = (\n...     1)\n\nAfter."
    assert module.fence_doctests(docstring) == (
        "Config of the step:\n\n    code\n\n"
        "```pycon\n>>> 1 + 1\n2\n>>> x = (\n...     1)\n```\n\nAfter."
    )
