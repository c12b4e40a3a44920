"""What an engine concludes: a Verdict with its Diagnostics and, for violations, a Trace."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ..model.interpreter import Step, Trace  # noqa: F401  (re-exported)
from ..model.semantics import CODES

VERDICTS = ("proved", "verified", "bounded", "unknown", "violation", "error")
EXIT_CODES = {"proved": 0, "verified": 0, "violation": 1, "bounded": 2, "unknown": 2, "error": 3}


@dataclass
class Diagnostic:
    """One finding, ruff-style: stable code, one-line message, location, and a help line."""

    code: str
    message: str
    location: str | None = None
    help: str | None = None
    details: list[str] = field(default_factory=list)
    # Other source locations of the finding (the second access of a race): location, message.
    related: list[dict] = field(default_factory=list)

    @property
    def name(self) -> str:
        return CODES.get(self.code, "error")

    def to_json(self) -> dict:
        data = asdict(self)
        data["name"] = self.name
        return data

    def one_line(self) -> str:
        where = f"{self.location}: " if self.location else ""
        return f"{where}{self.code} [{self.name}] {self.message}"


@dataclass
class Fix:
    """A suggested repair, already verified: the repaired protocol got `verdict` (`proved` or
    `verified`) before the fix was suggested."""

    description: str
    location: str | None
    edit: dict                         # replace_lines {file, start_line, end_line, text} or words
    verdict: str
    patch: str | None = None           # git-style diff, when the edit maps to source exactly

    def to_json(self) -> dict:
        return {"description": self.description, "location": self.location, "edit": self.edit,
                "verdict": self.verdict}


@dataclass
class Verdict:
    name: str
    verdict: str
    diagnostics: list[Diagnostic] = field(default_factory=list)
    trace: Trace | None = None
    states: int = 0
    transitions: int = 0
    depth: int = 0
    seconds: float = 0.0
    engine: str = "explore"
    params: dict[str, int] = field(default_factory=dict)
    source: str | None = None          # path::name
    reduction: bool = True
    coverage: str | None = None        # what a bounded search covered
    notes: list[str] = field(default_factory=list)
    expected: str | None = None        # the example's declared verdict, if any
    store: str | None = None           # explorer's state store: tuple, exact, fingerprint
    bytes_per_state: float | None = None   # resident memory grown per distinct state
    collision_probability: float | None = None  # fingerprint store: TLC's estimate
    fixes: list[Fix] | None = None     # verified repairs (None: repair was not asked for)
    # Findings a suppression silenced (barrierproof/suppress.py): each a Diagnostic's JSON plus
    # `by`, the comment or @protocol(ignore=...) that silenced it. Reported, never dropped.
    suppressed: list[dict] = field(default_factory=list)
    # prove's refutation at its smallest breaking values: the explorer's first finding at the
    # declared values, when it is another rule (checker/symbolic/declared.py). An expectation
    # states the declared values' verdict, so it is met by these codes too.
    at_declared: list[Diagnostic] = field(default_factory=list)

    def __post_init__(self) -> None:
        assert self.verdict in VERDICTS, self.verdict

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.verdict]

    @property
    def codes(self) -> list[str]:
        return [d.code for d in self.diagnostics]

    @property
    def label(self) -> str:
        """`verified`, or `violation:BP100` (the first diagnostic's code)."""
        if self.verdict in ("violation", "error") and self.diagnostics:
            return f"{self.verdict}:{self.diagnostics[0].code}"
        return self.verdict

    def matches(self, expected: str) -> bool:
        """Does this verdict satisfy an expectation like `verified` or `violation:BP101`?"""
        verdict, _, code = expected.partition(":")
        if verdict == "verified" and self.verdict == "proved":
            return True     # a proof for every parameter value covers the declared values too
        if verdict != self.verdict:
            return False
        return not code or code in self.codes or code in [d.code for d in self.at_declared]

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "verdict": self.verdict,
            "diagnostics": [d.to_json() for d in self.diagnostics],
            "trace": self.trace.to_json() if self.trace else None,
            "states": self.states,
            "transitions": self.transitions,
            "depth": self.depth,
            "seconds": round(self.seconds, 4),
            "engine": self.engine,
            "params": self.params,
            "source": self.source,
            "reduction": self.reduction,
            "coverage": self.coverage,
            "notes": self.notes,
            "expected": self.expected,
            "store": self.store,
            "bytes_per_state": self.bytes_per_state,
            "collision_probability": self.collision_probability,
            **({"fixes": [f.to_json() for f in self.fixes]} if self.fixes is not None else {}),
            **({"suppressed": self.suppressed} if self.suppressed else {}),
            **({"at_declared": [d.to_json() for d in self.at_declared]}
               if self.at_declared else {}),
        }
