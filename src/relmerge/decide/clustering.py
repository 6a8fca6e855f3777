"""Merging under constraints: union-find that refuses to join clusters across a keep.

This is the chaining guard: when A~B and B~C are merges but A and C were judged
distinct, A's cluster and C's cluster are never joined, whatever order edges come in.
Edges are applied strongest first, so the best-supported merges win a conflict.
"""

from __future__ import annotations

from collections.abc import Iterable


class ConstrainedClusters:
    def __init__(self, size: int) -> None:
        self._parent = list(range(size))
        self._members: dict[int, list[int]] = {i: [i] for i in range(size)}
        self._cannot: set[frozenset[int]] = set()

    def find(self, item: int) -> int:
        while self._parent[item] != item:
            self._parent[item] = self._parent[self._parent[item]]
            item = self._parent[item]
        return item

    def forbid(self, a: int, b: int) -> None:
        self._cannot.add(frozenset((a, b)))

    def forbidden(self, a: int, b: int) -> bool:
        return frozenset((a, b)) in self._cannot

    def can_join(self, a: int, b: int) -> bool:
        root_a, root_b = self.find(a), self.find(b)
        if root_a == root_b:
            return True
        return not any(
            frozenset((x, y)) in self._cannot
            for x in self._members[root_a]
            for y in self._members[root_b]
        )

    def join(self, a: int, b: int) -> bool:
        """Join the clusters of ``a`` and ``b`` unless a keep forbids it."""
        root_a, root_b = self.find(a), self.find(b)
        if root_a == root_b:
            return True
        if not self.can_join(a, b):
            return False
        if len(self._members[root_a]) < len(self._members[root_b]):
            root_a, root_b = root_b, root_a
        self._parent[root_b] = root_a
        self._members[root_a].extend(self._members.pop(root_b))
        return True

    def join_all(self, items: Iterable[int]) -> list[int]:
        """Join a group greedily in order; return the members that could not join the
        first member's cluster.

        Members refused by the first one still join each other where no keep forbids it:
        the group said they state one fact, and a keep between A and B says nothing about
        B and C. (Leaving them apart also left work for a second run: relmerge run on its
        own output would merge them then.)
        """
        items = list(items)
        anchors = items[:1]
        refused = []
        for item in items[1:]:
            if not any(self.join(anchor, item) for anchor in anchors):
                anchors.append(item)
            if self.find(item) != self.find(items[0]):
                refused.append(item)
        return refused

    def clusters(self) -> list[list[int]]:
        """Clusters as sorted member lists, ordered by their first member."""
        return sorted((sorted(members) for members in self._members.values()), key=lambda c: c[0])
