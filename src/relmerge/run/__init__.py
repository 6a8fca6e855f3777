"""The batch run: one batch of relations in, deduplicated relations and their logs out.

``pipeline`` holds the order of a run's phases and nothing else; ``intake`` takes the
input in (one streaming pass: check, remap, park) and cuts it into chunks of whole blocks;
the chunks are worked by an engine (``relmerge.engines``) through
``relmerge.stages.chunk``; ``writer`` writes the relation files and the logs as the chunks
land; ``result`` is the run's typed result; ``fingerprint`` the sha256 that names a run
(shared by the CLI and the step); ``phases`` the run's clock and progress; ``plan`` the
dry run; ``step`` the ``DeduplicateRelations`` step over it all.
"""
