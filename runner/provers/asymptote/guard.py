"""What an artifact may ask of asy and TeX, decided on asy's own tokens before asy runs.

Allowed, and nothing else of its kind:

- settings: exactly `settings.tex = "latex";` or `"pdflatex"` (the engines whose formats the image
  carries, without Lua), `settings.render = 0;` and `settings.prc = false;` (the kit's own choices,
  often written in diagrams meant for 3D). Every other use of the name `settings` is refused,
  reading included: `import/access/unravel settings`, `from settings ...`, an alias, another
  setting, a value that is not that literal. The output format is the request's (`--format`).
- modules: Asymptote's own drawing modules and olympiad/cse5, by name (MODULES). Not by path or
  URL (`import "../x" as x`), not `slide` or `map` (they run text as code), not `embed`/`external`
  (they put files into the output), not `animate`/`animation` (external tools, many frames).
- TeX packages: those in TEX_PACKAGES, named by `usepackage("...")` with a literal or by
  `\\usepackage{...}` in a string (so no shellesc, luacode, minted, epstopdf, asymptote, ...).

Refused outright: asy functions that run text as code or load files by computed names (`eval`,
`_eval`, `usersetting`, `asy`, `type`, `mapArray`, `mapTemplate`), `cputime` (the machine's CPU
time; the clock itself is fixed, see render.py), and, inside any string, TeX that reads or writes
files, reaches Lua or a shell, builds control-sequence names, changes catcodes or the interaction
mode, or ends the document (REFUSED_TEX). A string built at run time can still spell such TeX:
that is why TeX also runs as pdfTeX with shell escape off and kpathsea's openin_any/openout_any
paranoid (render.py), which refuses absolute and `..` paths whatever the spelling.

Source the guard cannot read with certainty (lexer.Unreadable) is refused too.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from runner.core.models import Diagnostic
from runner.provers.asymptote import lexer
from runner.provers.asymptote.lexer import Token


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# setting -> the one token text it may be given (a string's value without quotes)
ALLOWED_SETTINGS = {
    "tex": ("string", ("latex", "pdflatex")),
    "render": ("number", ("0",)),
    "prc": ("keyword", ("false",)),
}
SANDBOX_SETTINGS = ("safe", "globalwrite", "globalread")
CODE_FROM_TEXT = _words("eval _eval usersetting asy type mapArray mapTemplate")
MACHINE_STATE = frozenset(("cputime", "_cputime"))
# Debian's asymptote 2.85 less slide, map, embed, external, animate, animation and v3d*; then
# olympiad and cse5, not in Debian but common in olympiad diagrams (the image may pin olympiad).
MODULES = _words(
    """
    CAD annotate babel bezulate binarytree bsp colormap contour contour3 drawtree feynman
    flowchart fontsize geometry graph graph3 graph_settings graph_splinetype grid3 interpolate
    labelpath labelpath3 lmfit markers math metapost obj ode palette patterns plain plain_arcs
    plain_arrows plain_bounds plain_boxes plain_constants plain_debugger plain_filldraw
    plain_Label plain_margins plain_markers plain_paths plain_pens plain_picture plain_prethree
    plain_scaling plain_shipout plain_strings pstoedit rational rationalSimplex roundedpath
    simplex size10 size11 slopefield smoothcontour3 solids stats syzygy texcolors three
    three_arrows three_light three_margins three_surface three_tube tree trembling tube version
    x11colors
    olympiad cse5
"""
)
# Macro packages for symbols, fonts and colour: none reads files or reaches a shell or Lua.
TEX_PACKAGES = _words(
    """
    amsbsy amscd amsfonts amsmath amsopn amssymb amstext amsthm amsxtra array babel bbm bm
    calc cancel chemfig color courier dsfont esint eucal eufrak euscript exscale fix-cm fixmath
    fontenc gensymb graphics graphicx helvet ifthen inputenc latexsym lmodern marvosym mathabx
    mathpazo mathptmx mathrsfs mathtools mhchem newtxmath newtxtext nicefrac palatino pifont
    pxfonts relsize siunitx skull stmaryrd textcomp times tipa txfonts type1cm type1ec units
    upgreek wasysym xcolor xfrac yhmath
"""
)
REFUSED_TEX = _words(
    """
    input include includeonly InputIfFileExists IfFileExists @input @@input @iinput @input@
    openin closein read readline openout closeout write immediate typein verbatiminput
    VerbatimInput lstinputlisting includegraphics pdfximage pdfobj pdffiledump pdfmdfivesum
    pdffilesize pdffilemoddate special
    directlua latelua ShellEscape DelayedShellEscape
    csname scantokens catcode ExplSyntaxOn UseName @nameuse csuse pdfprimitive primitive
    errorstopmode scrollmode batchmode nonstopmode interactionmode pausing
    documentclass LoadClass @@end dump
"""
)  # files and streams; shells and Lua; names built from text; a terminal; the job
PACKAGE_COMMANDS = ("usepackage", "RequirePackage")
CONTROL_WORD = re.compile(r"\\([A-Za-z@]+|.)", re.DOTALL)
PACKAGE_ARGUMENTS = re.compile(r"\s*(?:\[[^\]]*\]\s*)?\{([^{}]*)\}")
DOCUMENT_ENVIRONMENT = re.compile(r"\s*\{\s*document\s*\}")
LINE_BREAK = re.compile(r"\r\n|\n|\r")  # asy's line ends (str.splitlines knows more)


def refusals(source: str) -> list[Diagnostic]:
    """Every refused construct in `source`, located (line and column 1-based, as asy counts)."""
    try:
        tokens = lexer.tokenize(source)
    except lexer.Unreadable as exc:
        return [
            _refusal(source, exc.offset, f"refused: the kit cannot read this as asy does ({exc})")
        ]
    found = [_refusal(source, offset, message) for offset, message in _findings(tokens)]
    return sorted(found, key=lambda d: (d.line or 0, d.column or 0))


def _findings(tokens: list[Token]) -> Iterator[tuple[int, str]]:
    skip_to = 0
    for index, token in enumerate(tokens):
        if index < skip_to:
            continue
        if token.kind == "id" and token.text == "settings":
            allowed = _allowed_setting(tokens, index)
            if allowed:
                skip_to = index + 6
            else:
                yield token.offset, _settings_message(tokens, index)
        elif token.kind == "id" and token.text in CODE_FROM_TEXT:
            message = f"refused: `{token.text}` runs text as asy code, which the kit cannot check"
            yield token.offset, message
        elif token.kind == "id" and token.text in MACHINE_STATE:
            message = f"refused: `{token.text}` reads the machine's CPU time: not reproducible"
            yield token.offset, message
        elif token.kind == "id" and token.text == "usepackage":
            yield from _usepackage(tokens, index)
        elif token.kind == "keyword" and token.text in ("import", "access", "include", "from"):
            yield from _module_statement(tokens, index)
        elif token.kind == "string":
            yield from _tex(token)


def _allowed_setting(tokens: list[Token], index: int) -> bool:
    """`settings . NAME = LITERAL ;` as a statement of its own, with an allowed NAME and value."""
    if index and not _is_op(tokens[index - 1], ";", "{", "}"):
        return False
    shape = tokens[index + 1 : index + 6]
    if len(shape) < 5 or not (
        _is_op(shape[0], ".") and _is_op(shape[2], "=") and _is_op(shape[4], ";")
    ):
        return False
    name, value = shape[1], shape[3]
    if name.kind != "id" or name.text not in ALLOWED_SETTINGS:
        return False
    kind, values = ALLOWED_SETTINGS[name.text]
    return value.kind == kind and value.text in values


def _settings_message(tokens: list[Token], index: int) -> str:
    following = tokens[index + 1 : index + 3]
    dotted = len(following) == 2 and _is_op(following[0], ".") and following[1].kind == "id"
    name = following[1].text if dotted else None
    if name in SANDBOX_SETTINGS:
        return f"refused: the artifact sets asy's `{name}`, a setting that guards the sandbox"
    what = f"`settings.{name}`" if name else "asy's `settings`"
    return (
        f'refused: {what}: an artifact may only write `settings.tex = "latex";` (or '
        '"pdflatex"), `settings.render = 0;` and `settings.prc = false;`; '
        "the output format comes from the request"
    )


def _module_statement(tokens: list[Token], index: int) -> Iterator[tuple[int, str]]:
    """Modules named by `import`, `access`, `include` and `from ... access` (camp.y's forms)."""
    keyword = tokens[index]
    rest = tokens[index + 1 :]
    if keyword.text == "access" and index >= 2 and tokens[index - 2].text == "from":
        return  # the names after `from m access` are m's, not modules
    if keyword.text == "from":
        # `from a.b unravel ...` reads a record already in scope (asy loads nothing for it).
        after = 1
        while after + 1 < len(rest) and _is_op(rest[after], ".") and rest[after + 1].kind == "id":
            after += 2
        if rest and rest[0].kind == "id" and after < len(rest) and rest[after].text == "unravel":
            return
        names = rest[:1]
    elif keyword.text == "access":
        names = list(_access_list(rest))
    else:
        names = rest[:1]
    if not names:
        yield keyword.offset, f"refused: the kit cannot read this `{keyword.text}` statement"
        return
    for name in names:
        if name.kind == "string":
            what = f"`{keyword.text}` of a file path or URL ({name.text!r}): name a module"
        elif name.kind != "id":
            what = f"the kit cannot read this `{keyword.text}` statement"
        elif name.text == "settings" or name.text in MODULES:
            continue  # `settings` is refused once, as a use of that name
        else:
            what = (
                f"module '{name.text}' is not one the kit renders with "
                "(Asymptote's own drawing modules, olympiad and cse5)"
            )
        yield keyword.offset, f"refused: {what}"


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


def _usepackage(tokens: list[Token], index: int) -> Iterator[tuple[int, str]]:
    call = tokens[index + 1 : index + 4]
    if (
        len(call) == 3
        and _is_op(call[0], "(")
        and call[1].kind == "string"
        and _is_op(call[2], ",", ")")
    ):
        yield from _packages(call[1].text, call[1].offset)
        return
    message = 'refused: `usepackage` must name its packages in a string literal: usepackage("x")'
    yield tokens[index].offset, message


def _packages(names: str, offset: int) -> Iterator[tuple[int, str]]:
    for package in (p.strip() for p in names.split(",")):
        if package not in TEX_PACKAGES:
            yield offset, f"refused: TeX package '{package}' is not one the kit allows"


def _tex(token: Token) -> Iterator[tuple[int, str]]:
    text = token.text
    carets = text.find("^^")
    if carets >= 0:
        message = "refused: `^^` in a string: TeX reads a character code, which can spell anything"
        yield token.place(carets), message
    for word in CONTROL_WORD.finditer(text):
        name = word[1]
        where = token.place(word.start())
        after = text[word.end() :]
        if name in REFUSED_TEX or name.startswith("lua"):
            yield where, f"refused: TeX `\\{name}` in a string"
        elif name in PACKAGE_COMMANDS:
            arguments = PACKAGE_ARGUMENTS.match(after)
            if arguments is None:
                yield where, f"refused: the kit cannot read the packages of this `\\{name}`"
            else:
                yield from _packages(arguments[1], where)
        elif name in ("begin", "end") and DOCUMENT_ENVIRONMENT.match(after):
            yield where, f"refused: TeX `\\{name}{{document}}` in a string"


def _is_op(token: Token, *texts: str) -> bool:
    return token.kind == "op" and token.text in texts


def _refusal(source: str, offset: int, message: str) -> Diagnostic:
    line, column = lexer.position(source, offset)
    lines = LINE_BREAK.split(source)
    context = lines[line - 1].strip() if 0 < line <= len(lines) else None
    return Diagnostic(message=message, line=line, column=column, context=context or None)
