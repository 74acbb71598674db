"""The emitter of ``tools/gen_bindings.py``: turns classified declarations into Python source.

Kept apart from the rules so each file reads top to bottom; it has no policy of its own beyond
layout. Output order is fixed (sorted names), so the output is reproducible byte for byte.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from typing import Any

from c_header_parser import Enum, Struct

LINE = 110
# Headers of the CUDA runtime: their enums are defined in (or imported by) each module that uses them.
CUDA_TYPE_HEADERS = ("library_types.h", "driver_types.h", "cuComplex.h")
# ctypes aliases defined at the top of every generated module.
ALIASES = (
    ("_int", "c_int"),
    ("_uint", "c_uint"),
    ("_short", "c_short"),
    ("_ushort", "c_ushort"),
    ("_long", "c_long"),
    ("_ulong", "c_ulong"),
    ("_longlong", "c_longlong"),
    ("_ulonglong", "c_ulonglong"),
    ("_char", "c_char"),
    ("_byte", "c_byte"),
    ("_ubyte", "c_ubyte"),
    ("_bool", "c_bool"),
    ("_size", "c_size_t"),
    ("_i8", "c_int8"),
    ("_u8", "c_uint8"),
    ("_i16", "c_int16"),
    ("_u16", "c_uint16"),
    ("_i32", "c_int32"),
    ("_u32", "c_uint32"),
    ("_i64", "c_int64"),
    ("_u64", "c_uint64"),
    ("_float", "c_float"),
    ("_double", "c_double"),
    ("_vp", "c_void_p"),
    ("_charp", "c_char_p"),
    ("_uintptr", "c_size_t"),
)


def _wrap_call(head: str, items: list[str], close: str, indent: str = "") -> str:
    """``head item, item close`` on one line, or the items filled into indented lines when too long.

    ``head`` ends with the opening bracket(s) and ``close`` starts with the closing one(s); a single
    item of a tuple (``head`` ending in ``, (``) gets its trailing comma.
    """
    joined = ", ".join(items)
    if len(items) == 1 and head.endswith(", ("):
        joined += ","
    line = f"{indent}{head}{joined}{close}"
    if len(line) <= LINE:
        return line
    inner = indent + "    "
    lines, current = [], inner
    for item in items:
        piece = item + ","
        if current != inner and len(current) + 1 + len(piece) > LINE:
            lines.append(current)
            current = inner
        current += piece if current == inner else " " + piece
    lines.append(current)
    return f"{indent}{head}\n" + "\n".join(lines) + f"\n{indent}{close}"


# ctypes alias -> the check kind of an argument passed by value (see nvmath/bindings/_loader.py).
VALUE_KINDS = {
    "_int": "i32",
    "_uint": "u32",
    "_short": "i16",
    "_ushort": "u16",
    "_long": "i64",
    "_ulong": "u64",
    "_longlong": "i64",
    "_ulonglong": "u64",
    "_byte": "i8",
    "_ubyte": "u8",
    "_bool": "bool",
    "_size": "u64",
    "_uintptr": "u64",
    "_i8": "i8",
    "_u8": "u8",
    "_i16": "i16",
    "_u16": "u16",
    "_i32": "i32",
    "_u32": "u32",
    "_i64": "i64",
    "_u64": "u64",
    "_char": "char",
    "_float": "f32",
    "_double": "f64",
    "_vp": "ptr",
}


def check_kind(p: Any) -> str:
    """How the argument of one input parameter is checked: ``ptr``, ``i32``... ``f64``, ``str``, ``array:i32``."""
    if p.kind == "ptr":
        return "ptr"
    if p.kind == "str":
        return "str"
    if p.kind == "in_array":
        return "array:" + VALUE_KINDS[p.ctype]
    return VALUE_KINDS[p.ctype]


def int_range(kind: str) -> tuple[int, int]:
    """The C range of an integer check kind (``ptr`` is an unsigned 64-bit address)."""
    if kind in ("ptr", "bool"):
        return (0, 2**64 - 1) if kind == "ptr" else (0, 1)
    bits = int(kind[1:])
    return (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if kind[0] == "i" else (0, 2**bits - 1)


def range_test(name: str, kind: str) -> str:
    """The fast-path test of one argument ('' when ctypes' own conversion is check enough).

    A wrong type either makes the comparison raise (str, bytes, None), or gives something other than
    ``True`` (numpy arrays and scalars), or passes it and is refused by ctypes (float for an integer).
    """
    if kind == "ptr" or kind[0] in "iu" or kind == "bool":
        lo, hi = int_range(kind)
        # operator.index first: an int subclass with rigged comparisons is checked by its real value
        return f"{lo} <= ({name} := _index({name})) <= {hi}"
    return ""


# Argument checks (hand-written, nvmath/bindings/_loader.py) inserted before the C call, after the
# integer conversion: values the C type allows but the library refuses with an unhelpful status.
_FFT_SIZES = {"nx", "ny", "nz", "batch"}
PRECHECKS = {
    "cufft": {
        name: "_loader.check_fft_plan({where!r}, Type, type, {sizes})"
        for name in ("plan1d", "plan2d", "plan3d", "make_plan1d", "make_plan2d", "make_plan3d")
    }
}


# Functions that create a handle destroyed by another than their "create" -> "destroy" counterpart.
EXTRA_CREATORS = {
    "cufft": {"plan1d": "destroy", "plan2d": "destroy", "plan3d": "destroy", "plan_many": "destroy"},
    "cublasLt": {"grouped_matrix_layout_create": "matrix_layout_destroy"},
}


def handle_pair(name: str, inputs: list, outputs: list, names: set[str], module: str) -> str | None:
    """The destroy function of a create/destroy pair ``name`` belongs to, or ``None``.

    A creator returns exactly one handle; a destroyer takes exactly one argument, the handle.
    """
    extra = EXTRA_CREATORS.get(module, {})
    if name in extra and len(outputs) == 1:
        return extra[name]
    if "destroy" in name and len(inputs) == 1 and not outputs and name.replace("destroy", "create") in names:
        return name
    if "create" in name and len(outputs) == 1 and name.replace("create", "destroy") in names:
        return name.replace("create", "destroy")
    return None


def _call_index(body: list[str]) -> int:
    """The index of the ``try:`` around the C call in a wrapper's body lines."""
    return next(i for i, line in enumerate(body) if line == "    try:\n" and "_p_" in body[i + 1])


def _wrap_bool(head: str, tests: list[str], indent: str) -> str:
    """``head a and b and c`` on one line, or in parentheses over several lines when too long."""
    line = f"{indent}{head}{' and '.join(tests)}"
    if len(line) <= LINE:
        return line
    inner = indent + "    "
    lines, current = [], inner
    for i, test in enumerate(tests):
        piece = test if i == len(tests) - 1 else test + " and"
        if current != inner and len(current) + 1 + len(piece) > LINE:
            lines.append(current)
            current = inner
        current += piece if current == inner else " " + piece
    lines.append(current)
    return f"{indent}{head}(\n" + "\n".join(lines) + f"\n{indent})"


def return_lines(func: Any, outputs: list) -> list[str]:
    """The end of a wrapper's body: the status check, then the C return value and the outputs."""
    body = ["    if _s:\n        _raise(_s)\n"] if func.returns == "status" else []
    results = [f"{p.name}.value" for p in outputs]
    if func.returns == "str":
        results.insert(0, "_r.decode() if _r is not None else None")
    elif func.returns == "value":
        results.insert(0, "_r")
    if len(results) == 1:
        body.append(f"    return {results[0]}\n")
    elif results:
        body.append(_wrap_call("return (", results, ")", "    ") + "\n")
    return body


def _docstring(text: str, indent: str) -> str:
    lines = []
    for paragraph in text.split("\n\n"):
        wrapped = textwrap.wrap(
            paragraph, LINE - len(indent) - 4, break_long_words=False, break_on_hyphens=False
        ) or [""]
        lines.extend(wrapped)
        lines.append("")
    lines.pop()
    if len(lines) == 1:
        return f'{indent}"""{lines[0]}"""\n'
    body = "".join(f"{indent}{line}\n" if line else "\n" for line in lines[1:])
    return f'{indent}"""{lines[0]}\n{body}{indent}"""\n'


class ModuleEmitter:
    """Builds the source of one generated module."""

    def __init__(
        self,
        *,
        spec: Any,
        model: Any,
        functions: list,
        version: str,
        cudart: str,
        provided: dict[str, dict[str, str]],
        attribute_enums: dict,
        scalars: dict[str, tuple[str, str, str]],
        attribute_type: Callable,
        member_names: Callable,
        enum_class_name: Callable,
        snake_case: Callable,
        excluded: dict[str, str],
    ):
        self.spec = spec
        self.model = model
        self.functions = functions
        self.version = version
        self.cudart = cudart
        self.provided = provided
        self.attribute_enums = attribute_enums
        self.scalars = scalars
        self.attribute_type = attribute_type
        self.member_names = member_names
        self.enum_class_name = enum_class_name
        self.snake_case = snake_case
        self.excluded = excluded
        self.public: list[str] = []
        self.arg_kinds: dict[str, tuple[str, ...]] = {}  # Python function -> check kind per parameter
        self.handle_kinds: list[str] = []  # destroy functions whose handles are tracked (double destroy)
        self.classes: dict[str, str] = {}  # C enum name -> Python class name available in this module

    # -- enums -------------------------------------------------------------------------------
    def referenced_enums(self) -> list[Enum]:
        """Enums this module owns, or uses in its declarations, or names in its headers' text."""
        model, spec = self.model, self.spec
        found: dict[str, Enum] = {}
        for header_name in spec.headers:
            header = model.headers.headers[header_name]
            for enum in header.enums:
                found[enum.name] = enum
            for word in header.identifiers:
                if word in model.enums or word in model.typedefs:
                    try:
                        enum = model.enum_of(word)
                    except KeyError:
                        continue
                    if enum is not None:
                        found[enum.name] = enum
        return sorted(found.values(), key=lambda e: (self.enum_class_name(e.name), e.name))

    def owner(self, enum: Enum) -> str | None:
        """The module that defines ``enum``'s class; ``None`` for CUDA types with no provider."""
        if enum.header in self.spec.headers:
            return self.spec.module
        for dep in self.spec.depends:
            if enum.name in self.provided.get(dep, {}):
                return dep
        if enum.header in CUDA_TYPE_HEADERS:
            return self.spec.module
        raise ValueError(f"{self.spec.module}: enum {enum.name} from {enum.header} has no provider")

    def emit_enums(self, imports: dict[str, list[str]]) -> list[str]:
        """Class definitions; names imported from other modules are added to ``imports``."""
        classes = []
        for enum in self.referenced_enums():
            name = self.enum_class_name(enum.name)
            if name in self.classes.values():
                raise ValueError(f"{self.spec.module}: two enums map to the class name {name}")
            self.classes[enum.name] = name
            self.public.append(name)
            owner = self.owner(enum)
            if owner != self.spec.module:
                imports.setdefault(owner, []).append(name)
                continue
            members = self.member_names(enum)
            body = [_docstring(f"C enum ``{enum.name}`` ({enum.header}).", "    "), "\n"]
            body += [f"    {m} = {e.value}\n" for m, e in zip(members, enum.members)]
            classes.append(f"class {name}(_IntEnum):\n" + "".join(body))
        return classes

    # -- errors ------------------------------------------------------------------------------
    def emit_error(self, imports: dict[str, list[str]]) -> str:
        spec = self.spec
        self.public.append(spec.error)
        for dep in spec.depends:
            if self.provided.get(dep, {}).get("__error__") == spec.error:
                imports.setdefault(dep, []).append(spec.error)
                return f"def _raise(status: int) -> None:\n    raise {spec.error}(status)\n"
        status = self.model.enums[spec.status_type]
        names = "".join(
            f"    {m.value}: {m.name!r},\n" for m in sorted(status.members, key=lambda m: m.value)
        )
        hint = spec.error_hint
        return (
            f"_STATUS_NAMES = {{\n{names}}}\n\n\n"
            f"class {spec.error}(_CudaLibraryError):\n"
            + _docstring(
                f"A {spec.pretty} call returned a failure status (``.status``, ``.status_name``).", "    "
            )
            + f"\n    library = {spec.pretty!r}\n\n"
            f"    def __init__(self, status: int, status_name: str | None = None, detail: str = {hint!r}):\n"
            f"        super().__init__(status, status_name or _STATUS_NAMES.get(int(status)), detail)\n\n\n"
            f"def _raise(status: int) -> None:\n    raise {spec.error}(status)\n"
        )

    # -- structs -----------------------------------------------------------------------------
    def structs(self) -> list[Struct]:
        out = []
        for header_name in self.spec.headers:
            out.extend(self.model.headers.headers[header_name].structs)
        return sorted(out, key=lambda s: self.dtype_name(s.name))

    def dtype_name(self, c_name: str) -> str:
        base = self.enum_class_name(c_name)
        return self.snake_case(base) + "_dtype"

    def emit_structs(self) -> str:
        structs = self.structs()
        if not structs:
            return ""
        entries = []
        for struct in structs:
            name = self.dtype_name(struct.name)
            self.public.append(name)
            fields = []
            for f in struct.fields:
                fields.append(f"({self.snake_case(f.name)!r}, {self.field_type(struct, f)!r}, {f.dims!r})")
            entries.append(
                f"    # {struct.name} ({struct.header})\n    {name!r}: (\n"
                + "".join(f"        {f},\n" for f in fields)
                + "    ),\n"
            )
        return (
            "# numpy dtypes of the C structs, built on first access (keeps `import` free of numpy).\n"
            "_STRUCT_DTYPES = {\n" + "".join(entries) + "}\n\n\n"
            "def __getattr__(name: str):\n"
            "    if name in _STRUCT_DTYPES:\n"
            "        return _attributes.struct_dtype(name, _STRUCT_DTYPES, globals())\n"
            '    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")\n'
        )

    def field_type(self, struct: Struct, f: Any) -> str:
        if f.type.pointers:
            return "intp"
        category, name = self.model.resolve(f.type.base)
        if category == "struct":
            return self.dtype_name(name)
        if category == "enum":
            return "int32"
        if category == "handle":
            return "intp"
        return self.scalars[name][2]

    # -- functions ---------------------------------------------------------------------------
    def emit_stubs(self) -> str:
        lines = [
            f'_bind = _loader.binder({self.spec.library!r}, globals(), "{self.spec.pretty} {self.version}")\n'
        ]
        for func in sorted(self.functions, key=lambda f: f.c.name):
            argtypes = [self.argtype(p) for p in func.params]
            lines.append(
                _wrap_call(f"_p_{func.c.name} = _bind({func.c.name!r}, {func.restype}, (", argtypes, "))")
                + "\n"
            )
        return "".join(lines)

    @staticmethod
    def argtype(p: Any) -> str:
        if p.kind == "value":
            return p.ctype
        return "_charp" if p.kind == "str" else "_vp"

    def emit_function(self, func: Any) -> str:
        inputs = [p for p in func.params if p.kind != "out"]
        outputs = [p for p in func.params if p.kind == "out"]
        head = f"def {func.name}("
        sig = _wrap_call(head, [p.name for p in inputs], "):")
        returns = self.describe_returns(func, outputs)
        doc = f"``{func.c.name}`` ({func.c.header}){returns}.\n\nC: ``{func.c.signature()}``"
        body = [sig + "\n", _docstring(doc, "    ")]
        self.arg_kinds[func.name] = tuple(check_kind(p) for p in inputs)
        retry = f"        return _retry({func.name}, locals(), _ARG_KINDS[{func.name!r}])"
        kinds = self.arg_kinds[func.name]
        # Fast path: one boolean expression range-checks every integer, handle and pointer argument
        # (a wrong type makes a comparison raise, or ctypes refuse the value below); anything else
        # takes the slow path, which names the function and the parameter in its error.
        tests = [range_test(p.name, k) for p, k in zip(inputs, kinds)]
        tests = [t for t in tests if t]
        if tests:
            body.append("    try:\n")
            body.append(_wrap_bool("_ok = ", tests, "        ") + "\n")
            body.append("    except Exception:\n        _ok = False\n")
            body.append(f"    if _ok is not True:\n{retry}\n")
        for p in func.params:
            if p.kind == "in_array":
                body.append(
                    f"    {p.name} = _array_of{p.ctype}({p.name}, {self.spec.module + '.' + func.name!r}, {p.name!r})\n"
                )
            elif p.kind == "str":
                body.append(
                    f"    {p.name} = _cstr({p.name}, {self.spec.module + '.' + func.name!r}, {p.name!r})\n"
                )
            elif p.kind == "out":
                body.append(f"    {p.name} = {p.ctype}()\n")
        args = [f"_byref({p.name})" if p.kind == "out" else p.name for p in func.params]
        target = {"status": "_s = ", "str": "_r = ", "value": "_r = ", "none": ""}[func.returns]
        symbol = f"_p_{func.c.name}"
        if inputs:
            body.append("    try:\n")
            body.append(_wrap_call(f"{target}{symbol}(", args, ")", "        ") + "\n")
            body.append("    except _ArgumentError:\n")
            body.append(f"{retry}\n")
        else:
            body.append(_wrap_call(f"{target}{symbol}(", args, ")", "    ") + "\n")
        body += return_lines(func, outputs)
        self._track_handles(func, inputs, outputs, body)
        check = PRECHECKS.get(self.spec.module, {}).get(func.name)
        if check:
            sizes = "{" + ", ".join(f"{p.name!r}: {p.name}" for p in inputs if p.name in _FFT_SIZES) + "}"
            line = check.format(where=f"{self.spec.module}.{func.name}", sizes=sizes)
            body.insert(_call_index(body), f"    {line}\n")
        self.public.append(func.name)
        return "".join(body)

    def _track_handles(self, func: Any, inputs: list, outputs: list, body: list[str]) -> None:
        """Register what a create function returns; refuse a second destroy of it (see HandleRegistry)."""
        key = handle_pair(func.name, inputs, outputs, {f.name for f in self.functions}, self.spec.module)
        if key is None:
            return
        if func.name == key:  # the destroy function: check before the call, forget after success
            handle = inputs[0].name
            qualified = f"{self.spec.module}.{func.name}"
            body.insert(_call_index(body), f"    _handles[{key!r}].destroying({handle}, {qualified!r})\n")
            body.append(f"    _handles[{key!r}].destroyed({handle})\n")
            self.handle_kinds.append(key)
        else:
            body.insert(len(body) - 1, f"    _handles[{key!r}].created({outputs[0].name}.value)\n")

    def describe_returns(self, func: Any, outputs: list) -> str:
        names = [p.name for p in outputs]
        if func.returns == "str":
            names.insert(0, "str")
        elif func.returns == "value":
            names.insert(0, "the C return value")
        if not names:
            return ""
        if len(names) == 1:
            return f"; returns {names[0]}"
        return f"; returns ({', '.join(names)})"

    # -- cuBLASLt attribute helpers ----------------------------------------------------------
    def emit_attributes(self) -> str:
        chunks = []
        for c_name, (stem, settable) in sorted(self.attribute_enums.items(), key=lambda kv: kv[1][0]):
            setter = f"{stem}_set_attribute" if settable else None
            getter = f"{stem}_get_attribute"
            enum = self.model.enums.get(c_name)
            if enum is None or enum.header not in self.spec.headers:
                continue
            cls = self.classes[enum.name]
            members = self.member_names(enum)
            table = "".join(
                f"        {m!r}: {self.attribute_type(self.model, enum, e.name, e.doc)!r},\n"
                for m, e in zip(members, enum.members)
            )
            dtype_fn = f"get_{stem}_attribute_dtype"
            chunks.append(
                f"{dtype_fn} = _attributes.dtype_getter(\n    {dtype_fn!r},\n    {cls},\n    {{\n{table}    }},\n)\n"
            )
            self.public.append(dtype_fn)
            if setter:
                chunks.append(
                    _wrap_call(
                        f"{stem}_set = _attributes.attribute_setter(",
                        [repr(stem + "_set"), setter, dtype_fn],
                        ")",
                    )
                    + "\n"
                )
                self.public.append(f"{stem}_set")
            chunks.append(
                _wrap_call(
                    f"{stem}_get = _attributes.attribute_getter(",
                    [repr(stem + "_get"), getter, dtype_fn],
                    ")",
                )
                + "\n"
            )
            self.public.append(f"{stem}_get")
        if not chunks:
            return ""
        return (
            "# numpy dtypes of the attribute values, read from the C type named in each enum value's doc\n"
            "# comment in the header, and set/get wrappers taking Python values.\n" + "\n".join(chunks)
        )

    # -- module ------------------------------------------------------------------------------
    def emit(self) -> str:
        spec = self.spec
        imports: dict[str, list[str]] = {}
        enum_classes = self.emit_enums(imports)
        error_code = self.emit_error(imports)
        structs = self.emit_structs()
        stubs = self.emit_stubs()
        functions = [self.emit_function(f) for f in self.functions]
        attributes = self.emit_attributes()
        arrays = sorted({p.ctype for f in self.functions for p in f.params if p.kind == "in_array"})
        headers = ", ".join(spec.headers)
        excluded = "".join(f"    {name}: {why}\n" for name, why in sorted(self.excluded.items()))
        doc = (
            f"Raw {spec.pretty} bindings: one function per C entry point of {headers} (generated).\n\n"
            "Handles, descriptors and pointers are ``int``; output parameters are returned; a failure "
            f"status raises :class:`{spec.error}`. Nothing is loaded at import time: each function resolves "
            "its symbol on first call (see ``nvmath/bindings/_loader.py``). The parameter rules are "
            "documented in ``tools/gen_bindings.py``."
        )
        if excluded:
            doc += "\n\nDeclared but not bound:\n\n" + excluded.rstrip("\n")
        parts = [
            "# GENERATED by tools/gen_bindings.py -- DO NOT EDIT.\n",
            (
                f"# From the {spec.pretty} {self.version} headers ({headers}) and the CUDA runtime "
                f"{self.cudart} type headers ({', '.join(CUDA_TYPE_HEADERS)}).\n"
            ),
            "# Regenerate: pip install -r tools/bindings-requirements.txt && python tools/gen_bindings.py\n",
            "# ruff: noqa\n",
            _docstring_module(doc),
            "\nfrom __future__ import annotations\n\n",
            "import ctypes as _c\nfrom enum import IntEnum as _IntEnum\nfrom operator import index as _index\n\n",
            "from nvmath._errors import CudaLibraryError as _CudaLibraryError\n\n",
            "from . import _attributes, _loader\n",
            *[_import_line(module, names) for module, names in sorted(imports.items())],
            "\n",
            "".join(f"{alias} = _c.{name}\n" for alias, name in ALIASES),
            "_byref = _c.byref\n_ArgumentError = _c.ArgumentError\n_retry = _loader.retry_call\n_cstr = _loader.c_string\n",
            "".join(f"_array_of{a} = _loader.int_array({a})\n" for a in arrays),
            f"\nHEADER_VERSION = {self.version!r}\n",
            "\n__all__ = [\n"
            + "".join(f"    {n!r},\n" for n in sorted(set(self.public) | {"HEADER_VERSION"}))
            + "]\n",
        ]
        parts += ["\n\n" + c for c in enum_classes]
        parts += ["\n\n" + error_code]
        if structs:
            parts.append("\n\n" + structs)
        parts.append("\n\n" + stubs)
        parts += ["\n\n" + f for f in functions]
        if attributes:
            parts.append("\n\n" + attributes)
        parts.append("\n\n" + self.emit_arg_kinds())
        if self.handle_kinds:
            rows = "".join(
                f"    {k!r}: _loader.HandleRegistry({self.spec.module + '.' + k!r}),\n"
                for k in sorted(self.handle_kinds)
            )
            parts.append(
                "\n\n# Handles destroyed through this module, per destroy function (a second destroy is refused).\n"
                "_handles = {\n" + rows + "}\n"
            )
        return "".join(parts)

    def emit_arg_kinds(self) -> str:
        """The table the slow path (and the generated bad-argument test) reads the parameter kinds from."""
        rows = "".join(
            _wrap_call(f"{name!r}: (", [repr(k) for k in kinds], ",)," if len(kinds) == 1 else "),", "    ")
            + "\n"
            for name, kinds in sorted(self.arg_kinds.items())
        )
        return (
            "# Check kind of every parameter, per function (see nvmath/bindings/_loader.py: retry_call).\n"
            "_ARG_KINDS = {\n" + rows + "}\n"
        )


def _import_line(module: str, names: list[str]) -> str:
    names = sorted(names, key=lambda n: (n.lower(), n))
    line = f"from .{module} import {', '.join(names)}"
    if len(line) <= LINE:
        return line + "\n"
    return _wrap_call(f"from .{module} import (", names, ")") + "\n"


def _docstring_module(text: str) -> str:
    lines = []
    for paragraph in text.split("\n\n"):
        if paragraph.startswith("    "):
            lines.extend(paragraph.split("\n"))
        else:
            lines.extend(textwrap.wrap(paragraph, LINE - 4, break_long_words=False, break_on_hyphens=False))
        lines.append("")
    lines.pop()
    return '"""' + "\n".join(lines) + '\n"""\n'


def emit_module(**kwargs: Any) -> tuple[str, dict[str, str]]:
    """(source, {C enum name: class name, "__error__": error class}) of one module."""
    emitter = ModuleEmitter(**kwargs)
    source = emitter.emit()
    provided = {c: py for c, py in emitter.classes.items()}
    provided["__error__"] = kwargs["spec"].error
    return source, provided
