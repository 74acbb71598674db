"""The data model of ``c_header_parser``: tokens and the declarations a header yields."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["CType", "Enum", "EnumMember", "Function", "Header", "Param", "Struct", "StructField", "Token"]


@dataclass(frozen=True)
class Token:
    """One lexical token; ``doc`` is the text of the comments just before it."""

    kind: str
    text: str
    line: int
    doc: str = ""


@dataclass(frozen=True)
class CType:
    """A C type as written: base name, pointee constness and pointer depth.

    ``const float* const x[]`` is ``CType("float", const=True, pointers=2, array=True)``.
    """

    base: str
    const: bool = False
    pointers: int = 0
    array: bool = False

    def __str__(self) -> str:
        text = ("const " if self.const else "") + self.base + "*" * self.pointers
        return text + ("[]" if self.array else "")


@dataclass(frozen=True)
class Param:
    """A function parameter (``name`` is empty for unnamed parameters)."""

    name: str
    type: CType


@dataclass(frozen=True)
class Function:
    """A function declaration."""

    name: str
    restype: CType
    params: tuple[Param, ...]
    header: str
    line: int

    def signature(self) -> str:
        """The declaration in C, on one line (used in docstrings)."""
        args = ", ".join(f"{p.type} {p.name}".strip() for p in self.params) or "void"
        return f"{self.restype} {self.name}({args})"


@dataclass(frozen=True)
class EnumMember:
    """An enumerator, its value and its doc comment."""

    name: str
    value: int
    doc: str = ""


@dataclass(frozen=True)
class Enum:
    """An enum; ``name`` is the typedef name when there is one, otherwise the tag."""

    name: str
    tag: str
    members: tuple[EnumMember, ...]
    header: str
    line: int


@dataclass(frozen=True)
class StructField:
    """A struct member; ``dims`` are fixed array dimensions (``int reserved[4]`` -> (4,))."""

    name: str
    type: CType
    dims: tuple[int, ...] = ()


@dataclass(frozen=True)
class Struct:
    """A struct with a body; ``name`` is the typedef name when there is one."""

    name: str
    tag: str
    fields: tuple[StructField, ...]
    header: str
    line: int


@dataclass
class Header:
    """Everything parsed from one header file."""

    name: str
    functions: list[Function] = field(default_factory=list)
    enums: list[Enum] = field(default_factory=list)
    structs: list[Struct] = field(default_factory=list)
    typedefs: dict[str, CType] = field(default_factory=dict)
    function_pointers: set[str] = field(default_factory=set)
    opaque_structs: set[str] = field(default_factory=set)
    inline_functions: list[str] = field(default_factory=list)
    macros: dict[str, int] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    identifiers: set[str] = field(default_factory=set)  # every identifier, in code or comments
