"""What Coq's own tools report, read: coqc's messages, coqchk's context summary, Print Assumptions.

Every reading here is of a channel the artifact cannot write:
- coqc's located messages are the compiler's. The artifact's own output is never parsed for a
  verdict.
- coqchk prints only names from the compiled library.
- the assumptions come from a driver that does not import the artifact (cold), or from the
  worker's audit (warm).
Both paths produce the same `Audit`, and one function builds the assumptions from it. So a verdict
never depends on the path.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from runner.core.models import Diagnostic
from runner.provers.common.lexing import coq_code

MODULE = "Artifact"
SOURCE = f"{MODULE}.v"
LIBRARY = f"{MODULE}.vo"
# The standard library's kernel primitives (`Primitive add := #int63_add.`) are declared in these
# libraries alone. coqchk lists them as axioms, as it lists every constant without a body. A
# primitive the standard library binds is the kernel's own operation, so not an assumption. One the
# file binds itself stays an assumption: its types are the file's to choose.
PRIMITIVE_LIBRARIES = (
    "Coq.Numbers.Cyclic.Int63.PrimInt63",
    "Coq.Floats.PrimFloat",
    "Coq.Array.PArray",
)
LOCATION = re.compile(r'^File "[^"]*", line (\d+), characters (\d+)-(\d+):$')
MESSAGE = re.compile(r"^(Error|Warning|Anomaly)\b:?\s*(.*)$", re.DOTALL)
MESSAGE_LIMIT = 2000


def parse_messages(output: str, source: str) -> list[Diagnostic]:
    """coqc's `File ..., line L, characters A-B:` blocks (and unlocated ones) as diagnostics."""
    diagnostics: list[Diagnostic] = []
    lines = source.splitlines()
    location: tuple[int, int, int] | None = None
    block: list[str] = []

    def flush() -> None:
        text = "\n".join(block).strip()
        match = MESSAGE.match(text)
        if match:
            kind, message = match.groups()
            severity = "warning" if kind == "Warning" else "error"
            message = message if kind != "Anomaly" else f"Anomaly: {message}"
            line = column = context = None
            if location is not None:
                line, column, end = location
                if 0 < line <= len(lines):
                    # Coq counts a line's bytes; a column here counts its characters.
                    encoded = lines[line - 1].encode()
                    column, end = (
                        len(encoded[:at].decode(errors="replace")) for at in (column, end)
                    )
                    context = lines[line - 1][column:end] or None
            message = re.sub(r"\./" + re.escape(SOURCE), SOURCE, " ".join(message.split()))
            diagnostics.append(
                Diagnostic(
                    severity=severity,
                    message=message[:MESSAGE_LIMIT],
                    line=line,
                    column=column,
                    context=context,
                )
            )
        block.clear()

    for raw in output.splitlines():
        located = LOCATION.match(raw)
        if located:
            flush()
            location = tuple(int(g) for g in located.groups())  # type: ignore[assignment]
        elif MESSAGE.match(raw) and block:
            flush()
            location = None
            block.append(raw)
        else:
            block.append(raw)
    flush()
    return diagnostics


# -- coqchk -------------------------------------------------------------------------------------

_SUMMARY_SECTIONS = {
    "Axioms": "axioms",
    "Constants/Inductives relying on type-in-type": "type_in_type",
    "Constants/Inductives relying on unsafe (co)fixpoints": "unguarded",
    "Inductives whose positivity is assumed": "nonpositive",
}
_SECTION = re.compile(r"^\* (.+?):\s*(<none>)?\s*$")
_NAME = re.compile(r"^\s+([^\s]+)\s*$")


@dataclass
class CheckerReport:
    """coqchk's verbose trace and CONTEXT SUMMARY (`coqchk -o -norec Artifact`, or the worker)."""

    checked: list[str] = field(default_factory=list)  # `checking cst:` names, in order
    module_types: set[str] = field(default_factory=set)  # paths of module types and parameters
    functors: set[str] = field(default_factory=set)
    axioms: set[str] = field(default_factory=set)
    type_in_type: set[str] = field(default_factory=set)
    unguarded: set[str] = field(default_factory=set)
    nonpositive: set[str] = field(default_factory=set)
    impredicative_set: bool = False
    complete: bool = False  # the summary was printed (every module was checked)
    primitives: set[str] = field(default_factory=set)  # axioms that are library primitives
    # Declarations that rely on definitional UIP: coqchk re-checks them under their own flag and
    # does not list them; Print Assumptions does (read_assumptions fills this).
    definitional_uip: set[str] = field(default_factory=set)

    def roots(self) -> list[str]:
        """The checked constants a term can name: none inside a module type or a functor."""
        hidden = self.module_types | self.functors
        seen: dict[str, None] = {}
        for name in self.checked:
            if not any(name.startswith(path + ".") for path in hidden):
                seen.setdefault(name)
        return list(seen)

    def flagged(self) -> list[str]:
        """Declarations the kernel accepted without one of its checks, as assumptions."""
        return sorted(
            [f"{n} (unsafe universe hierarchy)" for n in self.type_in_type]
            + [f"{n} (assumed guarded)" for n in self.unguarded]
            + [f"{n} (assumed positive)" for n in self.nonpositive]
            + [f"{n} (definitional UIP)" for n in self.definitional_uip]
        )


def read_checker(text: str) -> CheckerReport:
    report = CheckerReport()
    section: str | None = None
    last_module: str | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("checking cst:"):
            report.checked.append(stripped.removeprefix("checking cst:").strip())
            last_module = None
        elif stripped.startswith("checking module type:"):
            path = stripped.removeprefix("checking module type:").strip()
            report.module_types.add(path)
            if last_module is not None and not path.startswith(last_module + "."):
                report.functors.add(last_module)  # its first parameter
            last_module = None
        elif stripped.startswith("checking module:"):
            last_module = stripped.removeprefix("checking module:").strip()
        elif stripped == "CONTEXT SUMMARY":
            report.complete = True
        elif report.complete and (match := _SECTION.match(line)):
            section = _SUMMARY_SECTIONS.get(match.group(1))
            if match.group(1).startswith("Theory: Set is impredicative"):
                report.impredicative_set = True
        elif report.complete and section and (match := _NAME.match(line)):
            getattr(report, section).add(match.group(1))
    return report


def checker_anomaly(text: str) -> str | None:
    """The anomaly coqchk ended with (`Fatal Error: Anomaly ...`), or None for a rejection.

    Its "Please report" part is dropped and its line breaks are undone.
    """
    _, found, rest = text.partition("Fatal Error: ")
    return anomaly_text(rest) if found else None


def anomaly_text(text: str) -> str | None:
    """An anomaly's words as coqchk prints them, from coqchk or from the worker's re-check."""
    words = " ".join(text.partition("Please report at ")[0].split())
    return words if words.startswith("Anomaly") else None


# -- Print Assumptions --------------------------------------------------------------------------

_FLAG_LINE = re.compile(
    r"^(\S+) (is assumed to be positive|is assumed to be guarded|relies on an unsafe hierarchy|"
    r"relies on definitional UIP)\.\s*$"
)
_HEADERS = ("Axioms:", "Section Variables:", "Opaque constants:", "Transparent constants:")


class Inconsistent(ValueError):
    """The reports disagree, or one cannot be read: an infra error, never a verdict."""


def read_assumptions(text: str, report: CheckerReport) -> set[str]:
    """The axioms `Print Assumptions` listed, by the full names coqchk gives them.

    The driver prints names as short as its (artifact-free) namespace allows. Each must match an
    axiom coqchk found in the same library closure: its full name, or the dotted suffix of exactly
    one. Flag lines name declarations accepted under a flag. Those of positivity, guard and
    universes coqchk lists itself. Those of definitional UIP it does not, so they are kept here.
    """
    found: set[str] = set()
    section = None
    for line in text.splitlines():
        if not line.strip() or line[0].isspace():
            continue
        if line.startswith("Closed under the global context"):
            section = None
        elif line in _HEADERS:
            section = line
        elif line.startswith("used in "):
            continue  # what an axiom is used for
        elif section == "Axioms:" and (flag := _FLAG_LINE.match(line)):
            if flag.group(2) == "relies on definitional UIP":
                report.definitional_uip.add(flag.group(1))
        elif section == "Axioms:":
            name = line.split(" : ", 1)[0].strip()
            if " " in name:
                raise Inconsistent(
                    f"Print Assumptions printed a line the kit cannot read: {line!r}"
                )
            found.add(_full_name(name, report.axioms))
        else:
            raise Inconsistent(f"Print Assumptions printed {line[:200]!r}")
    return found


def _full_name(printed: str, axioms: set[str]) -> str:
    if printed in axioms:
        return printed
    own = printed.startswith(MODULE + ".")
    candidates = [
        a for a in axioms if a.endswith("." + printed) and a.startswith(MODULE + ".") == own
    ]
    if len(candidates) != 1:
        raise Inconsistent(
            f"Print Assumptions names {printed}, which is not exactly one of coqchk's axioms"
        )
    return candidates[0]


# -- The audit, from either path ----------------------------------------------------------------


@dataclass
class Audit:
    """What the independent re-check found about one compiled library."""

    checker: CheckerReport
    roots: list[str]  # the constants whose assumptions were collected
    used: set[str] | None  # the axioms they reach (full names); None: unreadable


def assumptions(audit: Audit) -> list[str]:
    """The file's assumptions; raises Inconsistent when coqchk's own report is unusable.

    coqchk is the authority. Every axiom it finds in the library itself is an assumption, whatever
    Print Assumptions says. So is every declaration it found accepted without a kernel check. Print
    Assumptions adds the library axioms the file's constants reach. When its report is unreadable or
    names what coqchk does not, every axiom coqchk found counts instead.
    """
    checker = audit.checker
    if not checker.complete:
        raise Inconsistent("coqchk printed no context summary")
    if checker.impredicative_set:
        raise Inconsistent("coqchk checked with an impredicative Set")
    own = {a for a in checker.axioms if a.startswith(MODULE + ".")}
    used = audit.used
    if used is None or not used <= checker.axioms:
        used = set(checker.axioms)
    else:
        # coqchk 8.16 lists a field of a sealed module or functor application as an axiom, as it has
        # no body of its own. An example is `Module N := F M` with `F (X : T) : T`. The traversal
        # looks into the implementation; a field it resolves there is not an axiom. A top-level
        # declaration is never sealed, so coqchk's word stands for it.
        own -= {a for a in own if a.count(".") >= 2 and a in audit.roots and a not in used}
    return sorted((used - checker.primitives) | own) + checker.flagged()


def primitive_candidates(axioms: set[str]) -> dict[str, set[str]]:
    """The axioms that may be standard-library primitives, by the library declaring them."""
    found: dict[str, set[str]] = {}
    for name in axioms:
        library, _, short = name.rpartition(".")
        if library in PRIMITIVE_LIBRARIES:
            found.setdefault(library, set()).add(short)
    return found


_PRIMITIVE = re.compile(r"(?<![\w'.])Primitive\s+([A-Za-z_][A-Za-z0-9_']*)")


def declared_primitives(library: str, text: str) -> set[str]:
    """The full names a standard-library source (Debian's, never the file's) binds to primitives."""
    return {f"{library}.{name}" for name in _PRIMITIVE.findall(coq_code(text))}
