"""The one exception tree of relmerge.

Everything relmerge raises on purpose subclasses :class:`RelmergeError`, so callers can catch
one type, and the CLI can turn any of them into a one-line message and exit code 2::

    RelmergeError
    ├── ConfigError        invalid configuration values (all problems listed at once)
    ├── InputError         unreadable input: missing file, bad entity mapping, empty batch
    ├── ExportError        an export could not be written (the destination is left as it was)
    ├── StoreError         object-store and relation-store problems
    │   ├── InvalidKeyError    a key with "..", an absolute path or an empty segment
    │   ├── StoreUnavailableError  a relation store's server or file cannot be reached
    │   ├── StoreSchemaError   not a relmerge store, not initialised, another schema version
    │   ├── BatchNotFoundError     no batch of that id in a relation store
    │   ├── RelationIdTakenError   a batch inserts an id stored with other content
    │   └── UndoRefusedError   a later batch changed what the undo would restore
    ├── ProviderError      a model endpoint failed for good (after retries), is misconfigured,
    │   │                  or is not there (the preflight request says which)
    │   ├── BudgetExhaustedError  the run's --max-llm-requests / --max-tokens is spent
    │   └── LLMUnavailableError   the circuit breaker is open: the endpoint stopped answering
    ├── InvalidAnswerError an LLM answer that is not valid for its request (retried, never used)
    └── WorkerDied         a worker process ended in the middle of a run (resumable)
"""

from __future__ import annotations

from collections.abc import Sequence


class RelmergeError(Exception):
    """Base class of every error relmerge raises on purpose."""


class ConfigError(RelmergeError):
    """A configuration value is invalid; the message lists every problem found.

    ``problems`` holds them one by one as ``(key path, what is wrong)`` (key path "" for
    the settings as a whole), for a caller that names where each value came from.
    """

    def __init__(self, message: str, problems: Sequence[tuple[str, str]] = ()) -> None:
        super().__init__(message)
        self.problems = tuple(problems)


class InputError(RelmergeError):
    """Input that cannot be read at all (a bad record is rejected instead, not raised)."""


class ExportError(RelmergeError):
    """Writing an exported copy failed; nothing was left half-written at the destination."""


class StoreError(RelmergeError):
    """An object store could not read or write a key."""


class InvalidKeyError(StoreError):
    """An object key that could escape the store root or is malformed."""


class StoreUnavailableError(StoreError):
    """A relation store cannot be reached (server down, wrong host, credentials, a file
    that cannot be opened); the message names the URL with its password hidden."""


class StoreSchemaError(StoreError):
    """The URL holds no relmerge relation store, or one of another schema version; the
    message says what to do."""


class BatchNotFoundError(StoreError):
    """A relation store has no batch of the id given."""


class RelationIdTakenError(StoreError):
    """A batch inserts a relation id the store already holds with other content: a stored
    relation keeps its id and content, so the batch is refused as a whole."""


class UndoRefusedError(StoreError):
    """A batch cannot be undone because later batches changed the same relations (or map
    input ids to relations it inserted); ``later`` names them, oldest first."""

    def __init__(self, message: str, later: list[str]) -> None:
        super().__init__(message)
        self.later = later


class ProviderError(RelmergeError):
    """A model provider failed.

    ``retryable`` says whether a later attempt may succeed (timeouts, 429, 5xx) or whether
    the endpoint is misconfigured (401, 404, bad request) so that retrying is pointless.
    ``attempts`` counts the HTTP requests actually sent before giving up. ``transport``:
    no answer came back at all (refused, DNS, TLS, timeout, 5xx, dropped connection), the
    failures that count towards the circuit breaker; an answer that came back and was
    refused or unusable is not one. ``timed_out``: the last attempt ended because no answer
    came back within the request's ``timeout`` (a transport failure too); a smaller request
    may still be answered in time (``decide.pack`` asks a timed-out pack's blocks alone).
    """

    def __init__(
        self,
        message: str,
        *,
        retryable: bool,
        attempts: int = 1,
        transport: bool = False,
        timed_out: bool = False,
    ) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.attempts = attempts
        self.transport = transport
        self.timed_out = timed_out


class BudgetExhaustedError(ProviderError):
    """The run's LLM budget is spent: no request was sent. Stages decide the rest without
    the LLM and record an issue; it never stops a run."""

    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=False, attempts=0)


class LLMUnavailableError(ProviderError):
    """The endpoint stopped answering mid-run and the circuit breaker opened: no request
    was sent. Like a spent budget it never stops a run: the group keeps its records, its
    undecided pairs are written for review, and it gets the issue ``llm_unavailable``."""

    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=False, attempts=0)


class InvalidAnswerError(RelmergeError):
    """An LLM answer failed parsing or validation; the message is told to the model on retry."""


class WorkerDied(RelmergeError):
    """A worker process of the run ended in the middle of it (killed, out of memory).

    Nothing is half-written: the run stops, and the same command resumes it, asking the
    LLM only what the cache (if the run keeps one) does not hold yet."""

    def __init__(self, pid: int, exit_code: int | None, cached: bool) -> None:
        self.pid = pid
        self.exit_code = exit_code
        kept = "answers so far are cached" if cached else "no cache: answers so far are lost"
        super().__init__(
            f"a relmerge worker process (pid {pid}) ended in the middle of the run "
            f"(exit code {exit_code}); run the same command again to resume; {kept}"
        )
