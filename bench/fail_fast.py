"""How fast and how safely ``relmerge run`` fails: dead or wrong endpoints, an endpoint
that dies mid-run, an interrupt, and forged requests to the review page.

    PYTHONPATH=. .venv/bin/python bench/fail_fast.py [--trials 3] [--parts endpoints dying
        interrupt review] [--interrupt-size 20000]

* **endpoints**: the sample batch shipped in the package (``relmerge.data.sample_dir()``)
  against each dead or wrong endpoint, ``--trials`` times each, as a user would run it (a
  fresh process, the default embedder):
  worst seconds from start to exit, the exit statuses, and the requests each endpoint
  received besides the one preflight request (must be 0).
* **dying**: the dev set (``../shared/data/dev``) against the gold judge on a loopback
  server that stops after answering a random number of questions (its port then refuses
  connections); default retries. Requests relmerge sent after the death (its own count of
  requests sent, less the answers it got), the exit status, clarifications written,
  records and chunk ids lost (must be 0), seconds from the death to the exit.
* **interrupt**: SIGINT and SIGTERM at a random moment of (a) a dev-set run against a slow
  gold judge, resumed and compared with an uninterrupted run, and (b) a synthetic batch of
  ``--interrupt-size`` relations with the default embedder and its helper process, while it
  embeds: worst seconds from the signal to the exit, exit statuses, resumed outputs equal.
* **review**: every forged request of ``tests/support/review_forgery.py`` against a live
  review page: accepted must be 0, answers recorded must be 0.

Prints one table per part and a final JSON line. Timings depend on the machine's load.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import orjson  # noqa: E402
from tests.support.dev_cli import DEV, dev_run_args, run_outputs  # noqa: E402
from tests.support.gold_judge import dev_gold_judge, gold_task_handler  # noqa: E402
from tests.support.llm_server import LLMServer, Reply, is_preflight  # noqa: E402
from tests.support.review_forgery import forged_requests, send  # noqa: E402

from relmerge.data import sample_dir  # noqa: E402

SAMPLE = sample_dir()
RELMERGE = [sys.executable, "-m", "relmerge"]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def file_server(posts: list[str]) -> Iterator[str]:
    """Python's file server, which answers POST with 501; ``posts`` gets each POST's path."""

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            posts.append(self.path)
            self.send_error(501, f"Unsupported method ({self.command!r})")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def table(title: str, header: list[str], rows: list[list[Any]]) -> None:
    widths = [
        max(len(str(x)) for x in [name, *(row[i] for row in rows)]) for i, name in enumerate(header)
    ]
    print(f"\n{title}")
    print("  ".join(str(name).ljust(w) for name, w in zip(header, widths, strict=True)))
    for row in rows:
        print("  ".join(str(x).ljust(w) for x, w in zip(row, widths, strict=True)))


# Dead or wrong endpoints -------------------------------------------------------------------


def run_sample(base_url: str, out: Path, *extra: str) -> tuple[int, float, str]:
    command = [*RELMERGE, "run", str(SAMPLE / "relations.jsonl"), "--entity-mapping"]
    command += [
        str(SAMPLE / "entity_id_mapping.json"),
        "--entities",
        str(SAMPLE / "entities.jsonl"),
    ]
    command += ["--output", str(out), "--llm-base-url", base_url, "--llm-model", "qwen", "-q"]
    started = time.monotonic()
    done = subprocess.run([*command, *extra], env=ENV, capture_output=True, text=True, check=False)
    return done.returncode, time.monotonic() - started, done.stderr.strip().splitlines()[-1]


def endpoints(trials: int, root: Path) -> list[dict[str, Any]]:
    # (case, how to get the URL and the server that counts what it receives)
    results = []

    def measure(case: str, url: str, server: LLMServer | list[str] | None, *extra: str) -> None:
        codes, seconds = [], []
        message = ""
        for trial in range(trials):
            code, took, message = run_sample(
                url, root / f"{case}-{trial}".replace(" ", "_"), *extra
            )
            codes.append(code)
            seconds.append(took)
        group_requests: int | str = "none reach a server"
        if isinstance(server, LLMServer):
            group_requests = sum(1 for item in server.received if not is_preflight(item.body))
        elif server is not None:  # a file server's POSTs: one preflight per run
            group_requests = len(server) - trials
        results.append(
            {
                "case": case,
                "worst_s": round(max(seconds), 2),
                "exit": sorted(set(codes)),
                "group_requests": group_requests,
                "message": message,
            }
        )
        print(results[-1], flush=True)

    port = free_port()
    measure("connection refused", f"http://127.0.0.1:{port}", None)
    measure("no scheme", f"127.0.0.1:{port}/v1", None)
    measure("unknown host", "http://relmerge-no-such-host.invalid/v1", None)
    posts: list[str] = []
    with file_server(posts) as url:
        measure("plain web server (HTTP 501)", url, posts)
    with LLMServer() as server:
        measure("HTTP 404 (base URL without /v1)", server.url, server)
    with LLMServer(preflight=Reply(status=401)) as server:
        measure("HTTP 401", server.base_url, server)
    with LLMServer(preflight=Reply(body={"status": "ok"})) as server:
        measure("JSON that is not a completion", server.base_url, server)
    with LLMServer() as server:
        measure("TLS to a plain HTTP port", f"https://127.0.0.1:{server.port}/v1", server)
    with LLMServer(preflight=Reply(delay=30.0)) as server:
        measure("no answer (--llm-timeout 2)", server.base_url, server, "--llm-timeout", "2")
    return results


# An endpoint that dies mid-run -------------------------------------------------------------


def lost(out: Path) -> int:
    """Input ids missing from the mapping plus input chunk ids missing from their output."""
    mapping = orjson.loads((out / "relation_id_mapping.json").read_bytes())
    missing = 0
    for line in (DEV / "relations.jsonl").read_bytes().splitlines():
        item = orjson.loads(line)
        target = mapping.get(item["relation_id"])
        if target is None:
            missing += 1
            continue
        relation = orjson.loads((out / "deduplicated_relations" / f"{target}.json").read_bytes())
        missing += len(set(item["source_chunk_ids"]) - set(relation["source_chunk_ids"]))
    return missing


class DiesAfter:
    """Answers like ``inner`` until ``server`` has received ``alive_for`` questions, then
    stops the server: its port refuses connections from then on."""

    def __init__(self, inner: Callable[[dict[str, Any]], Reply], server: LLMServer, alive_for: int):
        self.inner = inner
        self.server = server
        self.alive_for = alive_for
        self.died_at = 0.0

    def __call__(self, body: dict[str, Any]) -> Reply:
        if len(self.server.group_requests) >= self.alive_for and not self.died_at:
            self.died_at = time.monotonic()
            threading.Thread(target=self.server.stop, daemon=True).start()
        return self.inner(body)


def dying(trials: int, root: Path, rng: random.Random) -> list[dict[str, Any]]:
    judge = gold_task_handler(dev_gold_judge(DEV))
    rows = []
    for trial in range(trials):
        alive_for = rng.randint(5, 40)
        server = LLMServer()
        handler = DiesAfter(judge, server, alive_for)
        server.handler = handler
        out = root / f"dying-{trial}"
        with server:
            # The default --concurrency (8), default retries: as a user would meet it.
            command = [*RELMERGE, *dev_run_args(out, server.base_url, 8)]
            done = subprocess.run(command, env=ENV, capture_output=True, text=True, check=False)
            exited = time.monotonic()
        result = orjson.loads((out / "deduplicate_relations_result.json").read_bytes())
        # Every request failed after the death (the server never failed before it).
        after = result["llm_failed_requests"]
        rows.append(
            {
                "died_after_answers": result["llm_requests"] - after,
                "sent_after_death": after,
                "exit": done.returncode,
                "unavailable_groups": result["llm_unavailable_group_count"],
                "clarifications": result["clarification_count"],
                "lost": lost(out),
                "death_to_exit_s": round(exited - handler.died_at, 1) if handler.died_at else None,
                "message": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "",
            }
        )
        print(rows[-1], flush=True)
    return rows


# Interrupts --------------------------------------------------------------------------------


def interrupt_once(
    command: list[str], signum: int, ready: Callable[[], bool], delay: float
) -> tuple[int, float, str]:
    """Start ``command``; once ``ready()``, wait ``delay`` s, send ``signum``; return the exit
    status, the seconds from the signal to the exit and the last line on stderr."""
    process = subprocess.Popen(command, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300
    while not ready() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(delay)
    if process.poll() is not None:
        return process.returncode, 0.0, "finished before the signal"
    signalled = time.monotonic()
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=300)
    lines = stderr.decode().strip().splitlines()
    return process.returncode, time.monotonic() - signalled, lines[-1] if lines else ""


def interrupts(trials: int, root: Path, rng: random.Random, size: int) -> list[dict[str, Any]]:
    rows = []
    judge = gold_task_handler(dev_gold_judge(DEV))

    def slow(body: dict[str, Any]) -> Reply:
        return dataclasses.replace(judge(body), delay=0.05)

    with LLMServer(handler=slow) as server:
        reference = root / "reference"
        subprocess.run(
            [*RELMERGE, *dev_run_args(reference, server.base_url, 4)], env=ENV, check=True
        )
        expected = run_outputs(reference)
        for signum in (signal.SIGINT, signal.SIGTERM):
            for trial in range(trials):
                out = root / f"interrupt-{signum}-{trial}"
                command = [*RELMERGE, *dev_run_args(out, server.base_url, 4)]
                start = len(server.group_requests)

                def asking(start: int = start) -> bool:
                    return len(server.group_requests) > start

                code, took, line = interrupt_once(command, signum, asking, rng.uniform(0.0, 1.5))
                resumed = subprocess.run(command, env=ENV, capture_output=True, check=False)
                rows.append(
                    {
                        "run": "dev set, LLM answers",
                        "signal": signal.Signals(signum).name,
                        "exit": code,
                        "stop_s": round(took, 2),
                        "message": line,
                        "resumed_equal": resumed.returncode == 0 and run_outputs(out) == expected,
                    }
                )
                print(rows[-1], flush=True)

    # A large batch with the default embedder: interrupted while it embeds (the helper runs).
    sys.path.insert(0, str(ROOT / "bench"))
    from synthetic import generate_semantic

    records, _ = generate_semantic(size, seed=0)
    source = root / "synthetic.jsonl"
    source.write_bytes(b"".join(orjson.dumps(item) + b"\n" for item in records))
    for signum in (signal.SIGINT, signal.SIGTERM):
        for trial in range(trials):
            out = root / f"embed-{signum}-{trial}"
            command = [*RELMERGE, "run", str(source), "-o", str(out), "--no-cache", "-q"]
            code, took, line = interrupt_once(command, signum, lambda: True, rng.uniform(2.0, 6.0))
            rows.append(
                {
                    "run": f"{size:,} relations, embedding",
                    "signal": signal.Signals(signum).name,
                    "exit": code,
                    "stop_s": round(took, 2),
                    "message": line,
                    "resumed_equal": None,
                }
            )
            print(rows[-1], flush=True)
    return rows


# The review page ---------------------------------------------------------------------------


def review(root: Path) -> dict[str, Any]:
    from relmerge.review.queue import ReviewQueue
    from relmerge.review.web import ReviewServer

    out = root / "review"
    command = [*RELMERGE, "run", str(SAMPLE / "relations.jsonl"), "-o", str(out), "-q"]
    subprocess.run([*command, "--embedding", "hash"], env=ENV, check=True)
    accepted = []
    with ReviewServer(ReviewQueue(out)) as server:
        forged = forged_requests(server)
        for case, (method, path, headers, body) in forged.items():
            status, _ = send(server, method, path, headers, body)
            if status < 400:
                accepted.append(case)
    recorded = len(ReviewQueue(out).answers)
    row = {"forged_requests": len(forged), "accepted": len(accepted), "recorded": recorded}
    print(row, flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--parts", nargs="+", default=["endpoints", "dying", "interrupt", "review"])
    parser.add_argument("--interrupt-size", type=int, default=20_000)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        if "endpoints" in args.parts:
            rows = endpoints(args.trials, root)
            figures["endpoints"] = rows
            table(
                f"dead or wrong endpoints ({args.trials} runs each)",
                ["case", "worst s to exit", "exit", "group requests"],
                [[r["case"], r["worst_s"], r["exit"], r["group_requests"]] for r in rows],
            )
        if "dying" in args.parts:
            rows = dying(args.trials, root, rng)
            figures["dying"] = rows
            table(
                "an endpoint that dies mid-run (dev set, default retries)",
                [
                    *("answers before", "sent after", "exit", "unavailable groups"),
                    *("clarifications", "lost", "death to exit s"),
                ],
                [
                    [
                        r["died_after_answers"],
                        r["sent_after_death"],
                        r["exit"],
                        r["unavailable_groups"],
                        r["clarifications"],
                        r["lost"],
                        r["death_to_exit_s"],
                    ]
                    for r in rows
                ],
            )
        if "interrupt" in args.parts:
            rows = interrupts(args.trials, root, rng, args.interrupt_size)
            figures["interrupt"] = rows
            table(
                "interrupts",
                ["run", "signal", "exit", "s to stop", "resumed equal"],
                [[r["run"], r["signal"], r["exit"], r["stop_s"], r["resumed_equal"]] for r in rows],
            )
        if "review" in args.parts:
            figures["review"] = review(root)
    print(json.dumps(figures, ensure_ascii=False))


if __name__ == "__main__":
    main()
