"""Files shipped inside the package (the lexicons, the sample batch), found where the
package is installed so that a wheel alone carries everything relmerge reads."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from relmerge.errors import RelmergeError

SAMPLE_FILES = ("relations.jsonl", "entity_id_mapping.json", "entities.jsonl")


def sample_dir() -> Path:
    """The bundled sample batch (``relmerge demo``) as a folder on disk: `relmerge run`
    reads paths, and a wheel installs its data as plain files."""
    folder = resources.files(__name__).joinpath("sample")
    if not isinstance(folder, Path) or not folder.is_dir():
        raise RelmergeError(f"the sample batch is missing from the installed package ({folder})")
    return folder
