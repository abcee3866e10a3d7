"""KV-cache policies: which earlier tokens a query attends to, in cache order.

A policy of size C keeps at most C tokens, the current one included:
- `full`: every token so far (no eviction; bounded only by the model's context);
- `cache` with `sinks` = 0: window attention (0 + C), the C most recent tokens;
- `cache` with `sinks` = k: StreamingLLM (k + (C - k)), the first k tokens of the stream and the
  C - k most recent;
- `recompute`: the sliding window with re-computation, the C most recent tokens re-encoded from
  scratch for every new token (same token set as 0 + C, different hidden states).
Positions are assigned by order in the cache: the i-th kept token sits at position i and the
query at the last one, whatever its place in the text.
"""

from __future__ import annotations

from dataclasses import dataclass

KINDS = ("full", "cache", "recompute")
# The parts of the streaming NLL run as separate jobs, the longest first (`run.part_nll`)
PARTS = ("cache", "newline", "recompute")


@dataclass(frozen=True)
class Policy:
    """A KV-cache policy (see the module docstring)."""

    kind: str
    size: int | None = None
    sinks: int = 0

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown policy kind {self.kind!r}; expected one of {KINDS}")
        if self.kind == "full":
            if self.size is not None or self.sinks:
                raise ValueError("the full cache takes no size and no sinks")
            return
        if self.size is None or self.size < 1:
            raise ValueError(f"a {self.kind} policy needs a size >= 1")
        if self.kind == "recompute" and self.sinks:
            raise ValueError("the re-computation window keeps no sinks")
        if not 0 <= self.sinks < self.size:
            raise ValueError(f"sinks must be in [0, size): {self.sinks} of {self.size}")

    @property
    def name(self) -> str:
        if self.kind == "full":
            return "full"
        if self.kind == "recompute":
            return f"recompute {self.size}"
        return f"{self.sinks}+{self.size - self.sinks}"

    def split(self, t: int) -> tuple[int, int]:
        """(number of sinks, first recent token) kept for the query at stream index t.

        The query attends to tokens [0, sinks) and [first recent, t], in this cache order.
        """
        if self.kind == "full":
            return 0, 0
        sinks = min(self.sinks, t)
        return sinks, max(sinks, t - (self.size - sinks) + 1)

    def kept(self, t: int) -> list[int]:
        """The stream indices the query at index t attends to, in cache order."""
        sinks, first = self.split(t)
        return [*range(sinks), *range(first, t + 1)]


def parse(spec: str) -> Policy:
    """A policy from its short name: `full`, `k+r` (k sinks, r recent) or `recompute C`."""
    spec = spec.strip()
    if spec == "full":
        return Policy("full")
    if spec.startswith("recompute"):
        return Policy("recompute", int(spec.split()[1]))
    sinks, recent = (int(part) for part in spec.split("+"))
    return Policy("cache", sinks + recent, sinks)
