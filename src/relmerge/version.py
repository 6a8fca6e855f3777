"""The one place the version is written: the build reads it (pyproject's
``[tool.hatch.version]``), ``relmerge --version`` prints it, and a relation store records
which relmerge made it — so it lives in the value layer, importable from anywhere."""

__version__ = "0.1.0"
