"""Import adapters and exporters for other tools' graphs (GraphRAG, LightRAG/nano-graphrag).

``import_*`` turns a tool's output folder into relmerge input records and entities;
``export_*`` writes that folder back with the relations of a finished relmerge run, so a
graph can be deduplicated where it lives. pyarrow is imported only when these are used.
"""

from __future__ import annotations

from relmerge.adapters.common import Imported, write_import

__all__ = ["Imported", "write_import"]
