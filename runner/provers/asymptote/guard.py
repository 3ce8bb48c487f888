"""The few things a diagram may not write, decided on asy's own tokens before asy runs.

Four things form the boundary.

- The sandbox: no network, a private work dir and /tmp.
- asy's safe mode: no `system()`.
  It refuses writes to `settings.safe`, `globalwrite`, `globalread` and `outname`.
- TeX as pdfTeX, with shell escape off and kpathsea's openin_any/openout_any=p.
- The render, read from where no code of the diagram can write (render.py).

Everything else is asy's to decide.
That covers reading any setting, `eval`, TeX in labels, any TeX package and any module by name.

What stays refused is what containment alone cannot hold (measured on asy 2.85).

- Writing a setting that names a program asy runs, or its options (PROGRAM_SETTINGS).
  Examples are `gs`, `gsOptions`, `texcommand` and `dvisvgm`.
  The programs they name run, in safe mode too.
  `gsOptions="-dNOSAFER -c ..."` alone runs a shell.
  With a shell the diagram could write anything its sandbox can, the render included.
- Writing `settings.tex` other than as a pdfTeX engine literal.
  The value runs as the TeX program.
  `settings.tex = "/usr/bin/luatex"` runs LuaTeX, whose Lua I/O ignores kpathsea.
- Writing a viewer setting (`batchView`, ...) other than `= false;`.
  True starts a viewer program.
- Writing where modules come from (`dir`, `sysdir`), or `user`.
  The text of `usersetting()` runs as code.
- `settings` other than `settings.NAME` and a plain `access settings;`.
  That covers an alias, `import`, `unravel` and `from settings`.
  Writes through an alias cannot be seen.
- `_eval`: asy's evaluator, past the kit's run-time check of text run as code.
  That check lives in prooflock.asy, imported before the diagram.
  There `eval`, `type` and `mapArray` check their text, so `eval` itself is accepted.
- Module `plain` by name (`import plain`, `plain.eval`), in some sources.
  Those sources also name `eval`, `type`, `mapArray`, `asy` or `cputime`.
  Naming plain brings back its own, unchecked versions of those.
  The `import plain;` of tvgen.asy alone is accepted.
- Modules `map` and `slide`.
  They hand text to that evaluator themselves (`mapTemplate`, `asyinclude`).
- Modules by path or URL.
  A path can name a file the diagram wrote while it ran (`out/x.asy`).
  No check has read that code.

Source the guard cannot read as asy does (source.Unreadable) is refused too.
Some things are refused where they run, since no source shows them.
The kit's prooflock.asy refuses text run as code that uses these words.
It also refuses `asy()`, which imports files by path.
The kit never makes SVG from a DVI file: SVG comes through pdfTeX (converters.sh).
dvisvgm would run a DVI file's PostScript specials outside ghostscript's SAFER.
"""

from __future__ import annotations

from collections.abc import Iterator

from runner.provers.asymptote import source as asy_source
from runner.provers.asymptote.source import Token
from runner.provers.common.verdicts import Refusal


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Settings that name a program asy runs (a viewer too), a library it loads, or their options.
PROGRAM_SETTINGS = _words(
    """
    animate convert display dvips dvisvgm gs htmlviewer pdfviewer psviewer texcommand texpath
    textcommand libgs convertOptions dvipsOptions dvisvgmOptions gsOptions glOptions
    htmlviewerOptions pdfviewerOptions pdfreloadOptions psviewerOptions textcommandOptions
    epsdriver pngdriver psdriver
    """
)
# Settings that, true, make asy start a viewer program on its output: `false` is harmless.
VIEW_SETTINGS = _words("batchView interactiveView multipleView pdfreload")
CODE_SETTINGS = frozenset(("dir", "sysdir", "user"))  # where modules come from; text run as code
PDFTEX_ENGINES = ("latex", "pdflatex", "tex", "pdftex")  # all pdfTeX: kpathsea's limits hold
WRITES = frozenset(("=", "+=", "-=", "*=", "/=", "#=", "%=", "^=", "++", "--"))
MODULE_KEYWORDS = ("import", "access", "include", "from", "unravel")
EVALUATOR_MODULES = frozenset(("map", "slide"))
# What prooflock.asy checks (or fixes) and `import plain` would put back as plain's own.
PLAIN_UNCHECKED = frozenset(("eval", "type", "mapArray", "asy", "cputime"))


def refusals(source: str) -> list[Refusal]:
    """Every refused construct in `source`, located (line and column 1-based, as asy counts)."""
    try:
        tokens = asy_source.tokenize(source)
    except asy_source.Unreadable as exc:
        message = f"refused: the kit cannot read this as asy does ({exc})"
        return [_refusal(source, exc.offset, message)]
    found = [_refusal(source, offset, message) for offset, message in _findings(tokens)]
    return sorted(found, key=lambda r: (r.line, r.column))


def _findings(tokens: list[Token]) -> Iterator[tuple[int, str]]:
    unchecked = sorted({t.text for t in tokens if t.kind == "id"} & PLAIN_UNCHECKED)
    for index, token in enumerate(tokens):
        if token.kind == "id" and token.text == "settings":
            yield from _settings(tokens, index)
        elif token.kind == "id" and token.text == "_eval":
            yield (
                token.offset,
                (
                    "refused: `_eval` is asy's evaluator without the kit's check of text run as "
                    "code; `eval` is accepted"
                ),
            )
        elif token.kind == "id" and token.text == "plain" and _names_a_module(tokens, index):
            if unchecked:
                yield token.offset, _plain_message(unchecked)
        elif token.kind == "keyword" and token.text in MODULE_KEYWORDS[:4]:
            yield from _modules(tokens, index)


def _plain_message(unchecked: list[str]) -> str:
    names = ", ".join(f"`{name}`" for name in unchecked)
    return (
        f"refused: module `plain` by name in a source that uses {names}: plain's own would "
        "replace the kit's, which check text run as code (and keep CPU time fixed); plain's "
        "functions are in scope without naming it"
    )


def _settings(tokens: list[Token], index: int) -> Iterator[tuple[int, str]]:
    token = tokens[index]
    following = tokens[index + 1 : index + 3]
    before = tokens[index - 1] if index else None
    if (
        before is not None
        and before.kind == "keyword"
        and before.text == "access"
        and following
        and _is_op(following[0], ";")
        and not (index >= 2 and tokens[index - 2].text == "from")
    ):
        return  # `access settings;` names what is already in scope: no alias
    if not (len(following) == 2 and _is_op(following[0], ".") and following[1].kind == "id"):
        yield (
            token.offset,
            (
                "refused: asy's `settings` other than as `settings.NAME` (an alias, `import`, "
                "`unravel` or `from` of it): writes through it could not be seen"
            ),
        )
        return
    name = following[1].text
    after = tokens[index + 3] if index + 3 < len(tokens) else None
    written = (after is not None and _is_op(after, *WRITES)) or (
        before is not None and _is_op(before, "++", "--")
    )
    if not written:
        return  # reading a setting is harmless
    if name in PROGRAM_SETTINGS:
        yield (
            token.offset,
            (
                f"refused: `settings.{name}` names a program asy runs or its options; asy runs "
                "what it says even in safe mode (ghostscript options alone can start a shell)"
            ),
        )
    elif name in CODE_SETTINGS:
        what = "text `usersetting()` runs as code" if name == "user" else "where modules load from"
        yield token.offset, f"refused: `settings.{name}` decides {what}"
    elif name in VIEW_SETTINGS and not _literal(tokens, index, "keyword", ("false",)):
        yield (
            token.offset,
            (
                f"refused: `settings.{name}` other than `settings.{name} = false;`: asy would "
                "start a viewer program (xdg-open and what it chooses) on the output"
            ),
        )
    elif name == "tex" and not _literal(tokens, index, "string", PDFTEX_ENGINES):
        engines = ", ".join(f'"{e}"' for e in PDFTEX_ENGINES)
        yield (
            token.offset,
            (
                f"refused: `settings.tex` other than `settings.tex = ENGINE;` with ENGINE one of "
                f"{engines}: asy runs the value as the TeX program, and only pdfTeX keeps TeX "
                "from files and shells"
            ),
        )


def _literal(tokens: list[Token], index: int, kind: str, values: tuple[str, ...]) -> bool:
    """`settings.NAME = VALUE;`, the literal alone, with VALUE one of `values` (tokens of `kind`).

    Examples: `settings.tex = "pdflatex";`, `settings.batchView = false;`.
    """
    shape = tokens[index + 3 : index + 6]
    return (
        len(shape) == 3
        and _is_op(shape[0], "=")
        and shape[1].kind == kind
        and shape[1].text in values
        and _is_op(shape[2], ";")
    )


def _names_a_module(tokens: list[Token], index: int) -> bool:
    """Whether `plain` at `index` is the module: `plain.x`, or after a module keyword."""
    before = tokens[index - 1] if index else None
    after = tokens[index + 1] if index + 1 < len(tokens) else None
    keyword = before is not None and before.kind == "keyword" and before.text in MODULE_KEYWORDS
    return keyword or (after is not None and _is_op(after, "."))


def _modules(tokens: list[Token], index: int) -> Iterator[tuple[int, str]]:
    """The modules of `import`, `access`, `include` and `from ...` (camp.y's forms)."""
    keyword = tokens[index]
    rest = tokens[index + 1 :]
    if keyword.text == "access" and index >= 2 and tokens[index - 2].text == "from":
        return  # the names after `from m access` are m's, not modules
    names = list(_access_list(rest)) if keyword.text == "access" else rest[:1]
    for name in names:
        if name.kind == "string":
            yield (
                keyword.offset,
                (
                    f"refused: `{keyword.text}` of a file path or URL ({name.text!r}): a path can "
                    "name a file the diagram wrote while it ran; name a module"
                ),
            )
        elif name.kind == "id" and name.text in EVALUATOR_MODULES:
            yield (
                keyword.offset,
                (
                    f"refused: module '{name.text}' runs text as asy code past the kit's check "
                    "(mapTemplate, asyinclude)"
                ),
            )


def _access_list(rest: list[Token]) -> Iterator[Token]:
    """The modules of `access a, b as c, "d" as e;`."""
    i = 0
    while i < len(rest):
        yield rest[i]
        i += 1
        if i + 1 < len(rest) and rest[i].kind == "id" and rest[i + 1].kind == "id":
            i += 2  # `as NAME`
        if i < len(rest) and _is_op(rest[i], ","):
            i += 1
            continue
        return


def _is_op(token: Token, *texts: str) -> bool:
    return token.kind == "op" and token.text in texts


def _refusal(source: str, offset: int, message: str) -> Refusal:
    line, column = asy_source.position(source, offset)
    lines = asy_source.lines(source)
    context = lines[line - 1].strip() if 0 < line <= len(lines) else ""
    return Refusal(message=message, line=line, column=column, context=context)
