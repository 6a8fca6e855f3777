"""Soak of the run invariants: the properties of ``tests/test_invariants.py``, many examples.

CI runs each property with a moderate number of hypothesis examples; this runs the very
same properties (same strategies, same scripted model behaviours) with many more, then
prints what was tried — batches, records, runs, LLM requests, by model behaviour — and how
many input ids and chunk ids were checked, all found in the mapping and in their output.

    PYTHONPATH=. .venv/bin/python bench/soak_invariants.py --examples 5000 [--seed 1]
                                                           [--only idempotence]

Exit status 1 if any property failed (hypothesis prints the shrunk counterexample).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=5000, help="examples per property")
    parser.add_argument("--seed", type=int, default=None, help="hypothesis seed (default random)")
    parser.add_argument("--only", default="", help="run the properties whose name has this")
    args = parser.parse_args()
    # The test module reads the example count when it is imported.
    os.environ["RELMERGE_INVARIANT_EXAMPLES"] = str(args.examples)
    import hypothesis
    from tests import test_invariants as invariants

    properties: dict[str, Callable[..., Any]] = {
        "nothing_lost": invariants.test_nothing_is_lost_and_endpoints_never_move,
        "idempotence": invariants.test_running_on_its_own_output_changes_nothing,
        "cache": invariants.test_cached_rerun_asks_nothing_and_writes_the_same_bytes,
        "rules_only": invariants.test_rules_only_holds_every_invariant,
    }
    failed = []
    print(f"{args.examples} examples per property, seed {args.seed}")
    print(f"{'property':<14} {'batches':>8} {'records':>8} {'runs':>7} {'requests':>9} {'s':>7}")
    for name, test in properties.items():
        if args.only not in name:
            continue
        before = invariants.Tally(**vars(invariants.TALLY))
        before.by_behaviour = dict(invariants.TALLY.by_behaviour)
        if args.seed is not None:
            test = hypothesis.seed(args.seed)(test)
        start = time.perf_counter()
        try:
            test()
        except Exception:
            traceback.print_exc()
            failed.append(name)
        tally = invariants.TALLY
        print(
            f"{name:<14} {tally.batches - before.batches:>8} {tally.records - before.records:>8}"
            f" {tally.runs - before.runs:>7} {tally.requests - before.requests:>9}"
            f" {time.perf_counter() - start:>7.1f}"
        )
    tally = invariants.TALLY
    print(f"model behaviours: {dict(sorted(tally.by_behaviour.items()))}")
    print(f"merged output relations seen: {tally.merged_outputs}")
    print(
        f"input ids checked in the mapping: {tally.input_ids_checked}; "
        f"input chunk ids checked in their output: {tally.chunk_ids_checked}"
    )
    if failed:
        print(f"FAILED: {', '.join(failed)}")
        return 1
    print("every property held: nothing lost")
    return 0


if __name__ == "__main__":
    sys.exit(main())
