"""``python -m relmerge``: the command line."""

from relmerge.cli import main

main()
