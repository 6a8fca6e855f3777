"""A GraphML document read for its node and edge data and written back after edits.

Only what LightRAG / nano-graphrag files use (networkx's writer): ``<key>`` declarations,
nodes and edges with ``<data>`` children. The parsed tree is kept, so untouched nodes and
edges are written back with the same ids, attributes and text.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from relmerge.errors import InputError

GRAPHML_NS = "http://graphml.graphdrawing.org/xmlns"
_XSI_NS = "http://www.w3.org/2001/XMLSchema-instance"


@dataclass
class Edge:
    element: ET.Element
    source: str
    target: str
    data: dict[str, str]  # attr.name -> text


@dataclass
class GraphmlDocument:
    tree: ET.ElementTree[ET.Element]
    namespace: str  # "{uri}" or ""
    nodes: dict[str, dict[str, str]]  # node id -> attr.name -> text
    edges: list[Edge]
    edge_keys: dict[str, str]  # attr.name -> key id, for edge data
    _parents: dict[ET.Element, ET.Element] = field(default_factory=dict)

    def set_edge_data(self, edge: Edge, name: str, value: str) -> None:
        """Set (or add) one data value of an edge; its key must be declared for edges."""
        key = self.edge_keys.get(name)
        if key is None:
            return
        for data in edge.element.findall(f"{self.namespace}data"):
            if data.get("key") == key:
                data.text = value
                break
        else:
            ET.SubElement(edge.element, f"{self.namespace}data", {"key": key}).text = value
        edge.data[name] = value

    def remove_edge(self, edge: Edge) -> None:
        self._parents[edge.element].remove(edge.element)

    def write(self, path: Path) -> None:
        """UTF-8 with an XML declaration, the GraphML namespace as the default (no ns0:)."""
        ET.register_namespace("", GRAPHML_NS)
        ET.register_namespace("xsi", _XSI_NS)
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        try:
            self.tree.write(temporary, encoding="utf-8", xml_declaration=True)
            os.replace(temporary, path)
        finally:
            temporary.unlink(missing_ok=True)


def _data(element: ET.Element, namespace: str, names: dict[str, str]) -> dict[str, str]:
    return {
        names.get(data.get("key", ""), data.get("key", "")): data.text or ""
        for data in element.findall(f"{namespace}data")
    }


_PIECE = 1 << 20  # bytes parsed between two steps of the progress bar


def _parse(path: Path, on_bytes: Callable[[int], None]) -> ET.ElementTree[ET.Element]:
    """``ET.parse``, fed a piece at a time so that ``on_bytes`` hears how far it is."""
    parser = ET.XMLParser(target=ET.TreeBuilder())
    with path.open("rb") as handle:
        while piece := handle.read(_PIECE):
            parser.feed(piece)
            on_bytes(len(piece))
    return ET.ElementTree(parser.close())


def read_graphml(path: Path, on_bytes: Callable[[int], None] = lambda n: None) -> GraphmlDocument:
    """The document at ``path``; ``on_bytes`` hears of each piece of the file parsed."""
    try:
        tree = _parse(path, on_bytes)
    except OSError as error:
        raise InputError(f"cannot read {path}: {error.strerror}") from None
    except ET.ParseError as error:
        raise InputError(f"{path} is not valid XML: {error}") from None
    root = tree.getroot()
    namespace = root.tag[: root.tag.index("}") + 1] if root.tag.startswith("{") else ""
    if root.tag != f"{namespace}graphml":
        raise InputError(f"{path} is not a GraphML file (root element {root.tag!r})")
    keys = list(root.iter(f"{namespace}key"))
    names = {key.get("id", ""): key.get("attr.name", key.get("id", "")) for key in keys}
    edge_keys = {
        names[key.get("id", "")]: key.get("id", "")
        for key in keys
        if key.get("for", "all") in ("edge", "all")
    }
    nodes = {
        node.get("id", ""): _data(node, namespace, names) for node in root.iter(f"{namespace}node")
    }
    edges = [
        Edge(
            element,
            element.get("source", ""),
            element.get("target", ""),
            _data(element, namespace, names),
        )
        for element in root.iter(f"{namespace}edge")
    ]
    parents = {child: parent for parent in root.iter() for child in parent}
    return GraphmlDocument(tree, namespace, nodes, edges, edge_keys, parents)
