"""How a corpus's bare labels read the bare tool, and how the kit's verdict is compared with them.

The texts are newclid 2.0.2's own output, recorded on JGEX problems on this machine (the kit's
corpora run, and `newclid --problem FILE:NAME` alone): a proof it found and then failed to write,
a crash before any answer, and its CLI stopping on AlphaGeometry words it cannot read.
"""

from __future__ import annotations

from benchmarks.corpora import Compared
from runner.core.models import CheckResult, Verdict
from runner.provers.alphageometry import definitions
from tests.support.corpora import (
    Agreement,
    Bare,
    _newclid_solved,
    agreement,
    newclid_could_not_read,
)

# GDD_FULL_61-80_61 (a simtri goal): solved, then a crash writing the proof, exit 1.
SOLVED_THEN_CRASHED = """INFO:root:Run infos: {'success': True, 'runtime': 1.47, 'timeout': False}
Traceback (most recent call last):
  File ".../newclid/dependencies/why_predicates.py", line 46, in why_dependency
KeyError: <Predicate.SIMILAR_TRIANGLE: 'simtri'>
"""
# gao_L_L189-1: a crash inside DD+AR, before newclid says anything about the problem.
CRASHED = """Traceback (most recent call last):
  File ".../newclid/dependencies/why_predicates.py", line 667, in _why_eqratio_directions
    _, ang12, ang34, why0, why1, why2, why3, why4 = min_why
TypeError: cannot unpack non-iterable NoneType object
"""
# complete_010_Other_Auxiliary_ye_aux_ppara (`eq_trapezoid`) and E061-63f (`s_angle b a d 30`).
NO_SUCH_CONSTRUCTION = """Traceback (most recent call last):
  File ".../newclid/proof.py", line 520, in add_clause
    cdef = definitions[clause_construction.name]
KeyError: 'eq_trapezoid'
"""
DEGREES = """Traceback (most recent call last):
  File ".../newclid/symbols_graph.py", line 301, in get_or_create_const
    raise ValueError("Could not interpret constant angle: %s", const_value)
ValueError: ('Could not interpret constant angle: %s', '30')
"""
NOT_SOLVED = "INFO:root:Run infos: {'success': False, 'runtime': 3.2, 'timeout': False}\n"


def kit(verdict: Verdict) -> CheckResult:
    return CheckResult.model_construct(verdict=verdict, trust=None)


def test_newclid_solved_is_what_newclid_says_not_its_exit_code():
    assert _newclid_solved(1, SOLVED_THEN_CRASHED)[0] is True
    assert _newclid_solved(0, NOT_SOLVED)[0] is False


def test_a_crash_before_any_answer_is_no_label_and_matches_only_a_crash():
    solved, said = _newclid_solved(1, CRASHED)
    assert not solved and said.startswith("crashed: TypeError")
    crashed = Bare(False, 5.3, said, crashed=True)
    assert agreement(crashed, kit(Verdict.CRASH)) is Agreement.BOTH_CRASH
    assert agreement(crashed, kit(Verdict.FAIL)) is Agreement.AGREE  # neither solved it
    assert agreement(crashed, kit(Verdict.PASS)) is Agreement.DISAGREE
    # a plain "not solved" never matches a kit crash
    assert agreement(Bare(False, 3.2, NOT_SOLVED), kit(Verdict.CRASH)) is Agreement.DISAGREE


def test_what_newclids_cli_cannot_read_is_the_kit_accepting_more_never_a_disagreement():
    constructions = set(definitions.load())
    read = {
        text: Bare(False, 0.5, _newclid_solved(1, text)[1], crashed=True)
        for text in (NO_SUCH_CONSTRUCTION, DEGREES, CRASHED)
    }
    compared = Compared("AlphaGeometry", bare={"p": read[NO_SUCH_CONSTRUCTION]})
    compared.kit_may_accept_more = lambda bare: newclid_could_not_read(bare, constructions)
    compared.kit = {"p": kit(Verdict.PASS)}
    assert compared.outcome("p") is Agreement.KIT_MORE
    compared.bare = {"p": read[DEGREES]}
    assert compared.outcome("p") is Agreement.KIT_MORE
    # A crash inside DD+AR is newclid's own: a kit pass beside it stays a disagreement.
    compared.bare = {"p": read[CRASHED]}
    assert compared.outcome("p") is Agreement.DISAGREE
    # A KeyError naming no AlphaGeometry construction is not a word newclid lacks.
    other = Bare(False, 0.5, "crashed: KeyError: 'not_a_construction'", crashed=True)
    assert not newclid_could_not_read(other, constructions)
