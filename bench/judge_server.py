"""A gold-answering OpenAI-compatible judge server on 127.0.0.1, for benchmarks.

It answers the three relmerge tasks (relation_merge, relation_cluster, relation_judge)
from a gold file through :class:`relmerge.eval.gold_judge.GoldJudge`, optionally with
latency and an error rate p: so routing, LLM cost and clustering quality can be measured
over real HTTP without a paid model. ``--relations`` (the labelled relations, JSONL) lets
it recognise records a request shows under other ids (a packed request's aliases) by text.

    python bench/judge_server.py --gold ../shared/data/dev/gold.jsonl --port 8765 \
        --error-rate 0.1 --relations ../shared/data/dev/relations.jsonl
"""

from __future__ import annotations

import argparse
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import orjson

from relmerge.eval.gold import load_gold
from relmerge.eval.gold_judge import GoldJudge, task_of
from relmerge.io.load import read_jsonl_items


class _Server(ThreadingHTTPServer):
    # The default backlog of 5 drops connects of a burst of concurrent clients; each
    # dropped one costs the client a one-second retransmit and skews the timings.
    request_queue_size = 128
    daemon_threads = True


_BLOCK = re.compile(r"```json\n(.*?)\n```", re.DOTALL)


def _records(body: dict[str, Any]) -> list[dict[str, Any]]:
    for message in body.get("messages", []):
        if message.get("role") == "user":
            match = _BLOCK.search(message.get("content", ""))
            if match:
                records = orjson.loads(match.group(1))
                return records if isinstance(records, list) else []
    return []


def _task(body: dict[str, Any]) -> str:
    schema = (body.get("response_format") or {}).get("json_schema") or {}
    if isinstance(schema.get("name"), str):
        return str(schema["name"])
    for message in body.get("messages", []):
        if message.get("role") == "system":
            task = task_of(message.get("content", ""))
            if task:
                return task
    return "relation_cluster"


def prompt_chars(body: dict[str, Any]) -> int:
    """The characters of a request's messages: what the model reads."""
    return sum(len(str(message.get("content", ""))) for message in body.get("messages", []))


def estimated_tokens(chars: int) -> int:
    """A tokenizer-free count: ~4 characters a token (English; CJK text has more)."""
    return (chars + 3) // 4


class JudgeServer:
    """Serve a :class:`GoldJudge` over HTTP; ``requests`` counts chat requests served,
    ``prompt_chars`` the characters of their messages, ``by_task`` both per task. The
    ``usage`` it answers is :func:`estimated_tokens` of the messages and the answer."""

    def __init__(self, judge: GoldJudge, latency: float = 0.0, port: int = 0) -> None:
        self.judge = judge
        self.latency = latency
        self.requests = 0
        self.prompt_chars = 0
        self.by_task: dict[str, list[int]] = {}  # task -> [requests, prompt characters]
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", 0))
                body = orjson.loads(self.rfile.read(length) or b"{}")
                task, chars = _task(body), prompt_chars(body)
                with owner._lock:
                    owner.requests += 1
                    owner.prompt_chars += chars
                    figures = owner.by_task.setdefault(task, [0, 0])
                    figures[0] += 1
                    figures[1] += chars
                if owner.latency:
                    time.sleep(owner.latency)
                answer = owner.judge.answer(task, _records(body))
                text = orjson.dumps(answer).decode()
                payload = orjson.dumps(
                    {
                        "id": f"chatcmpl-{owner.requests}",
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": body.get("model", "gold-judge"),
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": text},
                                "finish_reason": "stop",
                            }
                        ],
                        "usage": {
                            "prompt_tokens": estimated_tokens(chars),
                            "completion_tokens": estimated_tokens(len(text)),
                            "total_tokens": estimated_tokens(chars) + estimated_tokens(len(text)),
                        },
                    }
                )
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self._server = _Server(("127.0.0.1", port), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> JudgeServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gold", type=Path, required=True)
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--error-rate", type=float, default=0.0)
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--relations",
        type=Path,
        help="the labelled relations (JSONL): records shown under other ids are recognised",
    )
    args = parser.parse_args()
    records = None
    if args.relations is not None:
        records = [item for _, item in read_jsonl_items(args.relations, "relations file")]
    judge = GoldJudge(load_gold(args.gold), args.error_rate, args.seed, records=records)
    with JudgeServer(judge, args.latency, args.port) as server:
        print(f"serving gold judge at {server.base_url} (error rate {args.error_rate})")
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
