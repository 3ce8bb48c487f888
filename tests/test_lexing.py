"""The scanning lexers (runner/provers/common/lexing.py): what they blank, and that every offset
and line of the artifact survives, whatever the text, so a refusal points at the right place."""

from __future__ import annotations

import random

import pytest

from runner.provers.common.lexing import c_like_code, coq_code, ocaml_code

LEXERS = (coq_code, c_like_code, ocaml_code)


def blank(text: str, *spans: str) -> str:
    """`text` with each of `spans` (in order, each after the one before) blanked."""
    at = 0
    for span in spans:
        at = text.index(span, at)
        text = text[:at] + " " * len(span) + text[at + len(span) :]
        at += len(span)
    return text


def test_coq_comments_nest_and_strings_keep_their_quotes():
    text = 'Lemma a. (* out (* in *) "x*)" still *) Print "a ""b"" c".'
    assert coq_code(text) == blank(text, '(* out (* in *) "x*)" still *)', 'a ""b"" c')


def test_a_coq_comments_end_outside_one_is_code():
    assert coq_code("x *) y") == "x *) y"


def test_c_like_comments_and_both_quotes_are_blanked():
    text = 'draw(p); // "a\nlabel("x\\"y", z); /* \' */ dot(\'q\');'
    assert c_like_code(text) == blank(text, '// "a', '"x\\"y"', "/* ' */", "'q'")


def test_ocaml_literals_quotations_and_comments():
    text = "let c = '\"' and s = {|(* |} in `x (* y` (* 'a \"*)\" *) f 'a x'"
    # a type variable and a primed name are code
    assert ocaml_code(text) == blank(text, '"', "(* ", "x (* y", '(* \'a "*)" *)')


@pytest.mark.parametrize("lexer", LEXERS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("text", ['"', 'x "', '"ab\n', "'", '(* "', '"\\'])
def test_an_unterminated_literal_keeps_the_texts_length_and_lines(lexer, text):
    code = lexer(text)
    assert len(code) == len(text)
    assert code.count("\n") == text.count("\n")


@pytest.mark.parametrize("lexer", LEXERS, ids=lambda f: f.__name__)
def test_any_text_keeps_its_offsets_newlines_and_code(lexer):
    """Random text over every delimiter: a character is either kept or blanked to a space, and
    every newline stays where it was."""
    pieces = list("()*\"'`{}|\\/ \nax_1.\t") + ["(*", "*)", '""', "{a|", "|a}", "//", "/*", "*/"]
    pieces += ["\u00a0", "\x1c", "é", "𝔸"]
    chooser = random.Random(20261203)
    for _ in range(3000):
        text = "".join(chooser.choice(pieces) for _ in range(chooser.randint(0, 40)))
        code = lexer(text)
        assert len(code) == len(text), text
        for original, scanned in zip(text, code, strict=True):
            assert scanned == original or (scanned == " " and original != "\n"), text
