"""A small parser for the C declarations in the NVIDIA math-library headers.

It understands exactly what ``tools/gen_bindings.py`` needs, nothing more:

* comments are stripped, but a comment is kept as the *doc* of the token that follows it (the
  cuBLASLt attribute enums name the attribute's C type in the doc comment of each value);
* preprocessor lines are dropped (every branch of ``#if`` is kept: the headers only use it for
  include guards, calling-convention macros and C++-only declarations); integer ``#define``
  constants are evaluated and kept (the version macros come from there);
* ``extern "C" {`` and its closing brace, calling-convention and deprecation macros
  (``CUBLASWINAPI``, ``CUFFTAPI``, ``CUSOLVERAPI``, ``__host__``, ``CUSOLVER_DEPRECATED(x)``,
  ``__attribute__((...))``, ...) are ignored;
* declarations: ``typedef enum [tag] {...} name;`` and ``enum tag {...};`` (values may be
  expressions such as ``1 << 3`` or refer to earlier values, of any enum); structs
  (``typedef struct [tag] {...} name;``, ``struct tag {...};``, forward declarations, pointer
  typedefs to opaque structs); function-pointer typedefs; plain typedefs; function declarations;
  ``static inline`` function definitions are recorded by name only (they are not library symbols).

Headers that only provide types (``driver_types.h``, ``cuComplex.h``) are parsed in *tolerant*
mode: a declaration the parser does not understand is skipped. In strict mode it is an error.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from c_header_model import CType, Enum, EnumMember, Function, Header, Param, Struct, StructField, Token

__all__ = [
    "CType",
    "Enum",
    "EnumMember",
    "Function",
    "Header",
    "HeaderSet",
    "Param",
    "ParseError",
    "Struct",
    "StructField",
    "parse_header",
]

# Words that carry no meaning for a binding: calling conventions, visibility, CUDA qualifiers.
# fmt: off
IGNORED_WORDS = frozenset({
    "CUBLASWINAPI", "CUBLASAPI", "CUFFTAPI", "CUSOLVERAPI", "CUDARTAPI", "CUDART_CB", "CUDA_CB", "__host__",
    "__device__", "__device_builtin__", "__cudart_builtin__", "__inline__", "__forceinline__", "__align__",
    "__builtin_align__", "extern", "volatile", "restrict", "__restrict__", "register",
    "NVSHMEMI_HOSTDEVICE_PREFIX",
})
# fmt: on
# Macros that take an argument list which must be dropped with them.
IGNORED_CALLS = frozenset({"__attribute__", "__declspec", "__dv", "__align__", "__builtin_align__"})
DEPRECATION_RE = re.compile(r"\w*DEPRECATED\w*")
# Words that make up a builtin scalar type name.
TYPE_KEYWORDS = frozenset(
    {"unsigned", "signed", "long", "short", "int", "char", "float", "double", "void", "bool"}
)
# fmt: off
CANONICAL_BUILTINS = {
    "long long int": "long long", "long long": "long long", "unsigned long long int": "unsigned long long",
    "unsigned long long": "unsigned long long", "unsigned int": "unsigned", "unsigned": "unsigned",
    "long int": "long", "unsigned long int": "unsigned long", "short int": "short",
    "unsigned short int": "unsigned short", "signed char": "signed char", "signed int": "int", "signed": "int",
}
# fmt: on

TOKEN_RE = re.compile(
    r"""
    (?P<comment>/\*.*?\*/|//[^\n]*)
  | (?P<pp>\#(?:\\\n|/\*.*?\*/|(?!/\*)[^\n])*)
  | (?P<string>"(?:\\.|[^"\\])*")
  | (?P<number>0[xX][0-9a-fA-F]+[uUlL]*|\d+(?:\.\d*)?(?:[eE][-+]?\d+)?[uUlLfF]*)
  | (?P<ident>[A-Za-z_]\w*)
  | (?P<punct><<|>>|\[\[|\]\]|::|[{}()\[\];,*=|&^~+\-/%<>?:.!])
  | (?P<ws>\s+)
    """,
    re.DOTALL | re.VERBOSE,
)


class ParseError(ValueError):
    """A declaration could not be understood (strict mode)."""


@dataclass
class HeaderSet:
    """Headers parsed in dependency order, sharing one namespace of constants."""

    headers: dict[str, Header] = field(default_factory=dict)
    constants: dict[str, int] = field(default_factory=dict)

    def add(self, path: Path, *, tolerant: bool = False) -> Header:
        """Parse ``path`` (its enum values may refer to constants of headers added before)."""
        header = parse_header(path.read_text(), path.name, constants=self.constants, tolerant=tolerant)
        self.headers[path.name] = header
        return header

    def typedefs(self) -> dict[str, CType]:
        """All typedefs of all headers."""
        out: dict[str, CType] = {}
        for header in self.headers.values():
            out.update(header.typedefs)
        return out

    def enums(self) -> dict[str, Enum]:
        """All enums by name (typedef name and tag)."""
        out: dict[str, Enum] = {}
        for header in self.headers.values():
            for enum in header.enums:
                out[enum.name] = enum
                if enum.tag:
                    out.setdefault(enum.tag, enum)
        return out

    def structs(self) -> dict[str, Struct]:
        """All structs with a body, by name and tag."""
        out: dict[str, Struct] = {}
        for header in self.headers.values():
            for struct in header.structs:
                out[struct.name] = struct
                if struct.tag:
                    out.setdefault(struct.tag, struct)
        return out


def tokenize(text: str) -> tuple[list[Token], dict[str, str]]:
    """Split ``text`` into tokens (comments attached as docs) and collect ``#define`` bodies."""
    tokens: list[Token] = []
    defines: dict[str, str] = {}
    doc: list[str] = []
    line = 1
    pos = 0
    while pos < len(text):
        match = TOKEN_RE.match(text, pos)
        if match is None:
            raise ParseError(f"line {line}: unexpected character {text[pos]!r}")
        kind, value = match.lastgroup, match.group()
        if kind == "comment":
            doc.append(value)
        elif kind == "pp":
            pp = re.match(r"#\s*define\s+(\w+)(?!\()\s*(.*)", value.replace("\\\n", " "), re.DOTALL)
            if pp:
                defines[pp.group(1)] = re.sub(r"/\*.*?\*/|//.*", "", pp.group(2)).strip()
        elif kind != "ws":
            tokens.append(Token(kind, value, line, "\n".join(doc)))
            doc = []
        line += value.count("\n")
        pos = match.end()
    return tokens, defines


def clean_doc(doc: str) -> str:
    """Comment markers removed, one paragraph per blank-line-separated block."""
    lines = []
    for raw in doc.splitlines():
        text = re.sub(r"^\s*(/\*+|\*+/|\*|//+)?", "", raw)
        text = re.sub(r"\*+/\s*$", "", text).rstrip()
        lines.append(text.strip())
    return "\n".join(lines).strip()


class _Expr:
    """Evaluates the integer constant expressions found in enums and ``#define``s."""

    PRECEDENCE: ClassVar[dict[str, int]] = {
        "|": 1,
        "^": 2,
        "&": 3,
        "<<": 4,
        ">>": 4,
        "+": 5,
        "-": 5,
        "*": 6,
        "/": 6,
        "%": 6,
    }

    def __init__(self, tokens: list[Token], names: dict[str, int]):
        self.tokens = tokens
        self.names = names
        self.pos = 0

    def evaluate(self) -> int:
        value = self._binary(0)
        if self.pos != len(self.tokens):
            raise ParseError(f"trailing tokens in expression: {[t.text for t in self.tokens[self.pos :]]}")
        return value

    def _binary(self, min_prec: int) -> int:
        left = self._unary()
        while self.pos < len(self.tokens):
            op = self.tokens[self.pos].text
            prec = self.PRECEDENCE.get(op)
            if prec is None or prec <= min_prec:
                break
            self.pos += 1
            right = self._binary(prec)
            left = _apply(op, left, right)
        return left

    def _unary(self) -> int:
        if self.pos >= len(self.tokens):
            raise ParseError("empty expression")
        tok = self.tokens[self.pos]
        self.pos += 1
        if tok.text == "-":
            return -self._unary()
        if tok.text == "+":
            return self._unary()
        if tok.text == "~":
            return ~self._unary()
        if tok.text == "(":
            value = self._binary(0)
            if self.pos >= len(self.tokens) or self.tokens[self.pos].text != ")":
                raise ParseError("unbalanced parenthesis in expression")
            self.pos += 1
            return value
        if tok.kind == "number":
            return int(tok.text.rstrip("uUlL"), 0)
        if tok.kind == "ident" and tok.text in self.names:
            return self.names[tok.text]
        raise ParseError(f"cannot evaluate {tok.text!r}")


_OPERATORS: dict[str, Callable[[int, int], int]] = {
    "|": operator.or_, "^": operator.xor, "&": operator.and_, "<<": operator.lshift, ">>": operator.rshift,
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": lambda a, b: int(a / b), "%": operator.mod,
}  # fmt: skip


def _apply(op: str, left: int, right: int) -> int:
    return _OPERATORS[op](left, right)


def evaluate(tokens: list[Token], names: dict[str, int]) -> int:
    """The value of an integer constant expression."""
    return _Expr(tokens, names).evaluate()


def _strip_macros(tokens: list[Token]) -> list[Token]:
    """Drop calling-convention, visibility and deprecation macros (with their argument lists)."""
    out: list[Token] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        word = tok.text
        if tok.kind == "ident" and (word in IGNORED_CALLS or DEPRECATION_RE.fullmatch(word)):
            i += 1
            if i < len(tokens) and tokens[i].text == "(":
                i = _matching(tokens, i) + 1
            continue
        if tok.kind == "ident" and word in IGNORED_WORDS:
            i += 1
            continue
        if word == "[[":
            while i < len(tokens) and tokens[i].text != "]]":
                i += 1
            i += 1
            continue
        out.append(tok)
        i += 1
    return out


def _matching(tokens: list[Token], start: int) -> int:
    """Index of the bracket closing the one at ``start``."""
    pairs = {"(": ")", "{": "}", "[": "]"}
    opening = tokens[start].text
    depth = 0
    for i in range(start, len(tokens)):
        if tokens[i].text == opening:
            depth += 1
        elif tokens[i].text == pairs[opening]:
            depth -= 1
            if depth == 0:
                return i
    raise ParseError(f"line {tokens[start].line}: unbalanced {opening!r}")


def _split(tokens: list[Token], sep: str) -> list[list[Token]]:
    """Split on ``sep`` at bracket depth 0."""
    parts: list[list[Token]] = [[]]
    depth = 0
    for tok in tokens:
        if tok.text in "({[":
            depth += 1
        elif tok.text in ")}]":
            depth -= 1
        if tok.text == sep and depth == 0:
            parts.append([])
        else:
            parts[-1].append(tok)
    return [p for p in parts if p]


def _statements(tokens: list[Token]):
    """Yield top-level statements as ``(tokens, is_definition)``."""
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok.text == "extern" and i + 1 < len(tokens) and tokens[i + 1].kind == "string":
            i += 3 if i + 2 < len(tokens) and tokens[i + 2].text == "{" else 2
            continue
        if tok.text in ("}", ";"):
            i += 1
            continue
        start, depth = i, 0
        while i < len(tokens):
            text = tokens[i].text
            if text == "{" and depth == 0 and tokens[i - 1].text == ")":
                end = _matching(tokens, i)
                yield tokens[start:i], True
                i = end + 1
                break
            if text in "({[":
                depth += 1
            elif text in ")}]":
                depth -= 1
            elif text == ";" and depth == 0:
                yield tokens[start:i], False
                i += 1
                break
            i += 1
        else:
            raise ParseError(f"line {tokens[start].line}: unterminated declaration")


def parse_declarator(
    tokens: list[Token], *, want_name: bool = True, constants: dict[str, int] | None = None
) -> tuple[CType, str, tuple[int, ...]]:
    """Parse ``[const] type [const] [*...] [name] [[N]...]`` into (type, name, array dims).

    Each array suffix counts as one pointer level (as it does for a parameter); the dims are
    returned too, ``-1`` for ``[]``.
    """
    dims: list[int] = []
    while tokens and tokens[-1].text == "]":
        open_at = max(i for i, t in enumerate(tokens) if t.text == "[")
        inner = tokens[open_at + 1 : -1]
        dims.insert(0, evaluate(inner, constants or {}) if inner else -1)
        tokens = tokens[:open_at]
    name = ""
    last = tokens[-1] if tokens else None
    if want_name and len(tokens) > 1 and last.kind == "ident" and last.text not in TYPE_KEYWORDS | {"const"}:
        name = last.text
        tokens = tokens[:-1]
    first_star = next((i for i, t in enumerate(tokens) if t.text == "*"), len(tokens))
    head, tail = tokens[:first_star], tokens[first_star:]
    words = [t.text for t in head if t.kind == "ident" and t.text not in ("const", "struct", "enum", "union")]
    line = tokens[0].line if tokens else "?"
    if not words or any(t.text not in ("*", "const") for t in tail):
        raise ParseError(f"line {line}: cannot parse type {[t.text for t in tokens]}")
    if all(w in TYPE_KEYWORDS for w in words):
        base = CANONICAL_BUILTINS.get(" ".join(words), " ".join(words))
    elif len(words) == 1:
        base = words[0]
    else:
        raise ParseError(f"line {line}: cannot parse type {words}")
    const = any(t.text == "const" for t in head)
    pointers = sum(1 for t in tail if t.text == "*") + len(dims)
    return CType(base, const=const, pointers=pointers, array=bool(dims)), name, tuple(dims)


class _HeaderParser:
    """Turns the statements of one header into :class:`Header` entries."""

    def __init__(self, name: str, constants: dict[str, int], tolerant: bool):
        self.header = Header(name)
        self.constants = constants
        self.tolerant = tolerant

    def run(self, text: str) -> Header:
        tokens, defines = tokenize(text)
        self.header.identifiers = set(re.findall(r"[A-Za-z_]\w*", text))
        self._defines(defines)
        for statement, is_definition in _statements(tokens):
            try:
                self._statement(_strip_macros(statement), is_definition)
            except ParseError as exc:
                if not self.tolerant:
                    raise ParseError(f"{self.header.name}: {exc}") from None
                self.header.skipped.append(f"line {statement[0].line}: {exc}")
        return self.header

    def _defines(self, defines: dict[str, str]) -> None:
        for name, body in defines.items():
            tokens, _ = tokenize(body)
            if not tokens:
                continue
            try:
                value = evaluate(tokens, self.constants)
            except (ParseError, ZeroDivisionError, ValueError):
                continue
            self.header.macros[name] = value
            self.constants.setdefault(name, value)

    def _statement(self, toks: list[Token], is_definition: bool) -> None:
        if not toks:
            return
        words = [t.text for t in toks]
        if is_definition:
            if "static" in words or "inline" in words:
                self.header.inline_functions.append(toks[words.index("(") - 1].text)
            return
        if words[0] == "typedef":
            self._typedef(toks[1:])
        elif words[0] in ("enum", "struct", "union") and "{" in words:
            self._tagged_body(toks, typedef_names=[])
        elif words[0] in ("struct", "union") and len(words) == 2:
            self.header.opaque_structs.add(words[1])
        elif "(" in words:
            self._function(toks)
        else:
            raise ParseError(f"line {toks[0].line}: unsupported declaration {' '.join(words)[:80]}")

    def _typedef(self, toks: list[Token]) -> None:
        words = [t.text for t in toks]
        if words[0] in ("enum", "struct", "union") and "{" in words:
            close = _matching(toks, words.index("{"))
            names = [d for d in _split(toks[close + 1 :], ",")]
            plain = [d[-1].text for d in names if len(d) == 1]
            self._tagged_body(toks[: close + 1], typedef_names=plain)
            tag = toks[1].text if toks[1].text != "{" else ""
            for decl in names:
                if len(decl) > 1:  # typedef struct {...} *name;
                    target = plain[0] if plain else f"{words[0]} {tag}"
                    self.header.typedefs[decl[-1].text] = CType(target, pointers=len(decl) - 1)
            return
        if "(" in words and words[words.index("(") + 1] == "*":  # function pointer
            at = words.index("(")
            self.header.function_pointers.add(toks[at + 2].text)
            return
        ctype, name, _ = parse_declarator(toks)
        if not name:
            raise ParseError(f"line {toks[0].line}: typedef without a name")
        if ctype.base != name:
            self.header.typedefs[name] = ctype

    def _tagged_body(self, toks: list[Token], typedef_names: list[str]) -> None:
        kind = toks[0].text
        tag = toks[1].text if toks[1].text != "{" else ""
        body = toks[[t.text for t in toks].index("{") + 1 : -1]
        name = typedef_names[0] if typedef_names else tag
        if kind == "enum":
            enum = Enum(name, tag, self._enum_members(body), self.header.name, toks[0].line)
            self.header.enums.append(enum)
        elif kind == "struct":
            fields = tuple(f for part in _split(body, ";") for f in self._fields(part))
            self.header.structs.append(Struct(name, tag, fields, self.header.name, toks[0].line))
        else:
            raise ParseError(f"line {toks[0].line}: unions are not supported")
        for alias in typedef_names[1:]:
            self.header.typedefs[alias] = CType(name)
        if tag and tag != name:
            self.header.typedefs.setdefault(f"{kind} {tag}", CType(name))

    def _enum_members(self, body: list[Token]) -> tuple[EnumMember, ...]:
        members: list[EnumMember] = []
        names: dict[str, int] = {}
        value = -1
        for part in _split(body, ","):
            head = part[0]
            if head.kind != "ident":
                raise ParseError(f"line {head.line}: bad enumerator {head.text!r}")
            if len(part) > 1:
                if part[1].text != "=":
                    raise ParseError(f"line {head.line}: bad enumerator {head.text!r}")
                value = evaluate(part[2:], {**self.constants, **names})
            else:
                value += 1
            names[head.text] = value
            members.append(EnumMember(head.text, value, clean_doc(head.doc)))
        self.constants.update(names)
        return tuple(members)

    def _fields(self, part: list[Token]) -> list[StructField]:
        if any(t.text in ("{", "(") for t in part):
            raise ParseError(
                f"line {part[0].line}: nested struct or function-pointer fields are not supported"
            )
        ctype, name, dims = parse_declarator(part, constants=self.constants)
        if any(d < 0 for d in dims):
            raise ParseError(f"line {part[0].line}: flexible array member {name}")
        if dims:  # a fixed array member is stored inline: keep the element type
            ctype = CType(ctype.base, ctype.const, ctype.pointers - len(dims))
        return [StructField(name, ctype, dims)]

    def _function(self, toks: list[Token]) -> None:
        words = [t.text for t in toks]
        if "static" in words or "inline" in words:
            return
        open_at = words.index("(")
        close = _matching(toks, open_at)
        if close != len(toks) - 1:
            raise ParseError(
                f"line {toks[0].line}: unexpected tokens after parameters of {words[open_at - 1]}"
            )
        name = toks[open_at - 1].text
        restype, _, _ = parse_declarator(toks[: open_at - 1], want_name=False)
        params = []
        for index, part in enumerate(_split(toks[open_at + 1 : close], ",")):
            if [t.text for t in part] == ["void"]:
                continue
            if any(t.text == "..." or t.text == "." for t in part):
                raise ParseError(f"line {toks[0].line}: variadic function {name}")
            ctype, pname, _ = parse_declarator(part)
            params.append(Param(pname or f"arg{index}", ctype))
        self.header.functions.append(Function(name, restype, tuple(params), self.header.name, toks[0].line))


def parse_header(
    text: str, name: str, *, constants: dict[str, int] | None = None, tolerant: bool = False
) -> Header:
    """Parse the text of one header.

    Args:
        text: the header source.
        name: its file name (recorded on every declaration).
        constants: enum values and macros of headers parsed before (updated in place).
        tolerant: skip declarations that cannot be parsed instead of raising.
    """
    return _HeaderParser(name, constants if constants is not None else {}, tolerant).run(text)
