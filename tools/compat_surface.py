"""Measure nvmath's call-compatibility with nvmath-python 1.0's public API surface.

Reads nvmath-python 1.0's public names and signatures from its wheel (``ast`` over the unzipped
``.py`` sources and ``.pyi`` stubs: nothing of it is imported or run) and compares them with ours
(``inspect`` on the imported package). Printed: per module, the share of compatible constructors,
methods / properties / functions, enum members and the instance attributes users read (``FFT``'s),
and every incompatibility found. A behaviour section runs calls written as nvmath-python users write
them (``tools/compat_behaviour.py``, CPU only) and checks results, accepted inputs and exception types.

Compatible means a call written for nvmath-python binds the same way here: each of its positional
parameters is accepted at the same position (by the same name where it can be passed by keyword),
each keyword parameter by name, every parameter it may omit is optional here too, extra parameters
here are optional; enum members exist with the same value (where the wheel states it); settable
properties stay settable.

Usage::

    python tools/compat_surface.py [--wheel PATH] [--all] [--details]

The wheel defaults to ``$NVMATH_PYTHON_WHEEL``, else ``.whl/nvmath_python-1.0.0-*.whl`` in this
checkout (``benchmarks/README.md`` shows the ``pip download`` command that puts it there).

``--all`` adds the generic ``nvmath.linalg`` names (in scope once branch ``generic`` lands) to the
in-scope total; exit status 1 when the in-scope share is below 100%.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import enum
import importlib
import inspect
import os
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
WHEEL_ENV = "NVMATH_PYTHON_WHEEL"
WHEEL_HINT = (
    f"set ${WHEEL_ENV}, or download it into .whl/ of the checkout: python3 -m pip download --no-deps "
    "--only-binary=:all: --python-version 3.12 --platform manylinux_2_28_x86_64 -d .whl nvmath-python==1.0.0"
)


def default_wheel() -> Path:
    """``$NVMATH_PYTHON_WHEEL``, else the checkout's ``.whl/nvmath_python-1.0.0-*.whl`` (may not exist)."""
    if os.environ.get(WHEEL_ENV):
        return Path(os.environ[WHEEL_ENV])
    found = sorted((REPO / ".whl").glob("nvmath_python-1.0.0-*.whl"))
    return found[0] if found else REPO / ".whl" / "nvmath_python-1.0.0-<platform>.whl"


DEFAULT_WHEEL = default_wheel()

# (report name, package in the wheel / our import name, counted in scope without --all)
SCOPES = [
    ("nvmath.linalg.advanced", "nvmath.linalg.advanced", True),
    ("nvmath.linalg.advanced.helpers.matmul", "nvmath.linalg.advanced.helpers.matmul", True),
    ("nvmath.fft", "nvmath.fft", True),
    ("nvmath (enums)", "nvmath._utils", True),
    ("nvmath.linalg (generic)", "nvmath.linalg", True),
]
_ENUM_BASES = {"IntEnum", "Enum", "IntFlag", "StrEnum"}
# instance attributes nvmath-python sets in __init__ that its users read (issue #16); the others it
# sets there are implementation details
_READ_ATTRIBUTES = {
    ("nvmath.fft", "FFT"): (
        "options", "execution_options", "axes", "inplace", "package", "memory_space", "execution_space",
        "device_id", "operand_data_type", "result_data_type", "fft_abstract_type", "internal_operand_layout",
    ),
}
_SKIP_LINALG = {"advanced"}


@dataclasses.dataclass
class Param:
    name: str
    kind: str  # "pos", "pok", "kw", "varargs", "varkw"
    default: bool


@dataclasses.dataclass
class Item:
    """One comparable unit: a constructor, a method / property / function, an enum member, a name."""

    scope: str
    what: str  # e.g. "Matmul(...)", "Matmul.plan", "MatmulEpilog.RELU"
    ok: bool
    why: str = ""


# ------------------------------------------------------------------------------ the wheel (ast)
class Wheel:
    """The unzipped wheel: module lookup, name resolution across imports, stubs for bindings."""

    def __init__(self, root: Path):
        self.root = root
        self._trees: dict[str, ast.Module | None] = {}

    def path_of(self, module: str) -> Path | None:
        base = self.root.joinpath(*module.split("."))
        for cand in (base.with_suffix(".py"), base / "__init__.py", base.with_suffix(".pyi")):
            if cand.exists():
                return cand
        return None

    def tree(self, module: str) -> ast.Module | None:
        if module not in self._trees:
            path = self.path_of(module)
            self._trees[module] = ast.parse(path.read_text()) if path else None
        return self._trees[module]

    def is_package(self, module: str) -> bool:
        path = self.path_of(module)
        return path is not None and path.name == "__init__.py"

    def absolute(self, module: str, level: int, name: str | None) -> str:
        if level == 0:
            return name or ""
        parts = module.split(".")
        if not self.is_package(module):
            parts = parts[:-1]
        parts = parts[: len(parts) - (level - 1)]
        return ".".join(parts + ([name] if name else []))

    def all_names(self, module: str) -> list[str]:
        """``__all__`` of a module, or its public top-level names (after star imports)."""
        tree = self.tree(module)
        if tree is None:
            return []
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in node.targets):
                return list(ast.literal_eval(node.value))
        names: list[str] = []
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
                names += self.all_names(self.absolute(module, node.level, node.module))
            elif isinstance(node, (ast.ClassDef, ast.FunctionDef)) and not node.name.startswith("_"):
                names.append(node.name)
        return names

    def resolve(self, module: str, name: str, depth: int = 0) -> tuple[str, ast.AST] | None:
        """``(module, node)`` defining ``name`` as seen from ``module`` (follows imports and aliases)."""
        tree = self.tree(module)
        if tree is None or depth > 12:
            return None
        for node in tree.body:
            if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and node.name == name:
                return module, node
            if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == name for t in node.targets):
                return self._resolve_value(module, node.value, depth) or (module, node)
            if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == name:
                return module, node
        for node in tree.body:
            if isinstance(node, ast.ImportFrom):
                src = self.absolute(module, node.level, node.module)
                for alias in node.names:
                    if alias.name == "*" and name in self.all_names(src):
                        return self.resolve(src, name, depth + 1)
                    if (alias.asname or alias.name) == name and alias.name != "*":
                        sub = f"{src}.{alias.name}"
                        if self.tree(sub) is not None:
                            return sub, self.tree(sub)  # a submodule
                        return self.resolve(src, alias.name, depth + 1)
        return None

    def _resolve_value(self, module: str, value: ast.AST, depth: int) -> tuple[str, ast.AST] | None:
        if isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name):
            target = self._module_alias(module, value.value.id)
            if target:
                return self.resolve(target, value.attr, depth + 1)
        if isinstance(value, ast.Name):
            return self.resolve(module, value.id, depth + 1)
        if isinstance(value, ast.Call):  # functools.wraps(f)(functools.partial(f, kw=...)): f's signature
            inner = value.args[0] if value.args else None
            if isinstance(inner, ast.Call) and inner.args and isinstance(inner.args[0], ast.Name):
                found = self.resolve(module, inner.args[0].id, depth + 1)
                if found and isinstance(found[1], ast.FunctionDef):
                    fixed = {k.arg for k in inner.keywords if k.arg}
                    return found[0], _Partial(found[1], fixed)
        return None

    def _module_alias(self, module: str, alias_name: str) -> str | None:
        tree = self.tree(module)
        for node in tree.body if tree else ():
            if isinstance(node, ast.ImportFrom):
                src = self.absolute(module, node.level, node.module)
                for alias in node.names:
                    if (alias.asname or alias.name) == alias_name:
                        return f"{src}.{alias.name}"
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if (alias.asname or alias.name) == alias_name:
                        return alias.name
        return None


@dataclasses.dataclass
class _Partial:
    """A ``functools.partial`` of a function: the fixed keywords stay overridable with defaults."""

    func: ast.FunctionDef
    fixed: set[str]


def _params(
    args: ast.arguments, drop_first: bool = False, defaults_for: set[str] = frozenset()
) -> list[Param]:
    pos = [*args.posonlyargs, *args.args]
    n_def = len(args.defaults)
    out: list[Param] = []
    for i, a in enumerate(pos):
        kind = "pos" if i < len(args.posonlyargs) else "pok"
        out.append(Param(a.arg, kind, i >= len(pos) - n_def or a.arg in defaults_for))
    if args.vararg:
        out.append(Param(args.vararg.arg, "varargs", True))
    for a, d in zip(args.kwonlyargs, args.kw_defaults):
        out.append(Param(a.arg, "kw", d is not None or a.arg in defaults_for))
    if args.kwarg:
        out.append(Param(args.kwarg.arg, "varkw", True))
    return out[1:] if drop_first and out and out[0].kind in ("pos", "pok") else out


def _decorators(node: ast.AST) -> list[str]:
    return [ast.unparse(d) for d in getattr(node, "decorator_list", [])]


def _dataclass_kw_only(node: ast.ClassDef) -> bool | None:
    """``None`` if not a dataclass, else whether it is keyword-only."""
    for d in node.decorator_list:
        call = d if isinstance(d, ast.Call) else None
        name = ast.unparse(call.func if call else d)
        if name.split(".")[-1] == "dataclass":
            keywords = call.keywords if call else []
            return any(k.arg == "kw_only" and getattr(k.value, "value", False) for k in keywords)
    return None


def _eval_int(node: ast.AST) -> int | None:
    try:
        value = eval(compile(ast.Expression(node), "<enum>", "eval"), {"__builtins__": {}})  # noqa: S307
    except Exception:  # noqa: BLE001 - a value that refers to other names: compared by name only
        return None
    return value if isinstance(value, int) else None


class TheirClass:
    """What the wheel says about a class: enum members, constructor, methods, properties."""

    def __init__(self, wheel: Wheel, module: str, node: ast.ClassDef):
        self.node, self.module, self.wheel = node, module, wheel
        bases = [ast.unparse(b).split(".")[-1] for b in node.bases]
        self.is_enum = any(b in _ENUM_BASES for b in bases)
        self.members: dict[str, int | None] = {}
        if self.is_enum:
            for st in node.body:
                if isinstance(st, ast.Assign):
                    for t in st.targets:
                        if isinstance(t, ast.Name) and not t.id.startswith("_"):
                            self.members[t.id] = _eval_int(st.value)
                elif isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name):
                    if not st.target.id.startswith("_") and "ClassVar" in ast.unparse(st.annotation):
                        self.members[st.target.id] = None

    def constructor(self) -> list[Param] | None:
        fields = self._fields(self.node, self.module, set())
        if fields is not None:
            return fields
        init = self._method("__init__")
        return _params(init.args, drop_first=True) if init is not None else None

    def _fields(self, node: ast.ClassDef, module: str, seen: set) -> list[Param] | None:
        kw_only = _dataclass_kw_only(node)
        if kw_only is None or node.name in seen:
            return None
        seen.add(node.name)
        params: list[Param] = []
        for base in node.bases:
            found = self._resolve_base(module, base)
            if found:
                inherited = self._fields(found[1], found[0], seen)
                params += inherited or []
        for st in node.body:
            if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name):
                ann = ast.unparse(st.annotation)
                if "ClassVar" in ann or "InitVar" in ann:
                    continue
                value = st.value
                is_field_call = isinstance(value, ast.Call) and ast.unparse(value.func).endswith("field")
                init_false = is_field_call and any(
                    k.arg == "init" and getattr(k.value, "value", True) is False for k in st.value.keywords
                )
                if init_false:
                    continue
                params.append(Param(st.target.id, "kw" if kw_only else "pok", st.value is not None))
        return params

    def _resolve_base(self, module: str, base: ast.AST) -> tuple[str, ast.ClassDef] | None:
        found = None
        if isinstance(base, ast.Name):
            found = self.wheel.resolve(module, base.id)
        elif isinstance(base, ast.Attribute):
            found = self.wheel._resolve_value(module, base, 0)
        if found and isinstance(found[1], ast.ClassDef):
            return found  # type: ignore[return-value]
        return None

    def _method(self, name: str) -> ast.FunctionDef | None:
        for st in self.node.body:
            if isinstance(st, ast.FunctionDef) and st.name == name:
                return st
        return None

    def methods(self) -> dict[str, tuple[str, list[Param] | None]]:
        """name -> ("method" | "static" | "class" | "property" | "settable", params)."""
        out: dict[str, tuple[str, list[Param] | None]] = {}
        for st in self.node.body:
            if not isinstance(st, ast.FunctionDef):
                continue
            if st.name.startswith("_") and st.name not in ("__enter__", "__exit__"):
                continue
            decos = _decorators(st)
            if "property" in decos:
                out.setdefault(st.name, ("property", None))
            elif any(d.endswith(".setter") for d in decos):
                out[st.name] = ("settable", None)
            elif "staticmethod" in decos:
                out[st.name] = ("static", _params(st.args))
            elif "classmethod" in decos:
                out[st.name] = ("class", _params(st.args, drop_first=True))
            else:
                out[st.name] = ("method", _params(st.args, drop_first=True))
        return out


# ------------------------------------------------------------------------------ ours (inspect)
def _our_params(obj: Any, drop_first: bool = False) -> list[Param] | None:
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return None
    kinds = {
        inspect.Parameter.POSITIONAL_ONLY: "pos",
        inspect.Parameter.POSITIONAL_OR_KEYWORD: "pok",
        inspect.Parameter.KEYWORD_ONLY: "kw",
        inspect.Parameter.VAR_POSITIONAL: "varargs",
        inspect.Parameter.VAR_KEYWORD: "varkw",
    }
    params = [Param(p.name, kinds[p.kind], p.default is not p.empty) for p in sig.parameters.values()]
    return params[1:] if drop_first and params else params


def compatible(theirs: list[Param], ours: list[Param]) -> str:
    """``""`` when every call that binds to ``theirs`` binds the same way to ``ours``; else why not."""
    o_pos = [p for p in ours if p.kind in ("pos", "pok")]
    o_by_name = {p.name: p for p in ours if p.kind in ("pok", "kw")}
    o_varargs = any(p.kind == "varargs" for p in ours)
    o_varkw = any(p.kind == "varkw" for p in ours)
    t_pos = [p for p in theirs if p.kind in ("pos", "pok")]
    for i, tp in enumerate(t_pos):
        if i >= len(o_pos):
            if not o_varargs:
                return f"positional parameter {tp.name!r} (#{i}) not accepted positionally"
            continue
        op = o_pos[i]
        if tp.kind == "pok" and (op.name != tp.name or op.kind != "pok") and not o_varkw:
            return f"parameter #{i} is {op.name!r} ({op.kind}) here, {tp.name!r} (positional/keyword) there"
        if tp.default and not op.default:
            return f"parameter {tp.name!r} is optional there, required here"
    for tp in theirs:
        if tp.kind == "kw":
            op = o_by_name.get(tp.name)
            if op is None and not o_varkw:
                return f"keyword parameter {tp.name!r} missing"
            if op is not None and tp.default and not op.default:
                return f"keyword parameter {tp.name!r} is optional there, required here"
        if tp.kind in ("varargs", "varkw") and not any(p.kind == tp.kind for p in ours):
            return f"*{tp.name} ({tp.kind}) not accepted"
    t_names = {p.name for p in theirs}
    for i, op in enumerate(ours):
        if op.default or op.kind in ("varargs", "varkw"):
            continue
        is_their_pos = op.kind in ("pos", "pok") and o_pos.index(op) < len(t_pos)
        if not is_their_pos and op.name not in t_names:
            return f"extra required parameter {op.name!r} here"
    return ""


def compare_class(scope: str, name: str, theirs: TheirClass, ours: Any) -> list[Item]:
    items: list[Item] = []
    if theirs.is_enum:
        members = getattr(ours, "__members__", None)
        for member, value in theirs.members.items():
            if members is None or member not in members:
                items.append(Item(scope, f"{name}.{member}", False, "missing"))
            elif value is not None and int(members[member]) != value:
                why = f"value {int(members[member])} != {value}"
                items.append(Item(scope, f"{name}.{member}", False, why))
            else:
                items.append(Item(scope, f"{name}.{member}", True))
        return items
    ctor = theirs.constructor()
    if ctor is not None:
        why = "not a class here" if not isinstance(ours, type) else compatible(ctor, _our_params(ours) or [])
        items.append(Item(scope, f"{name}(...)", not why, why))
    for meth, (kind, params) in theirs.methods().items():
        static = inspect.getattr_static(ours, meth, None) if isinstance(ours, type) else None
        label = f"{name}.{meth}"
        if static is None:
            items.append(Item(scope, label, False, "missing"))
            continue
        if kind in ("property", "settable"):
            settable = not isinstance(static, property) or static.fset is not None
            ok = kind == "property" or settable
            items.append(Item(scope, label, ok, "" if ok else "read-only here, settable there"))
            continue
        if meth in ("__enter__", "__exit__"):  # the with-statement calls them positionally
            items.append(Item(scope, label, callable(static), "" if callable(static) else "not callable"))
            continue
        if isinstance(static, staticmethod):
            ours_params = _our_params(static.__func__)
        elif isinstance(static, classmethod):
            ours_params = _our_params(static.__func__, drop_first=True)
        else:
            ours_params = _our_params(static, drop_first=True)
        why = "not callable here" if ours_params is None else compatible(params or [], ours_params)
        items.append(Item(scope, label, not why, why))
    return items


def compare_name(wheel: Wheel, scope: str, module: str, name: str, ours_mod: Any) -> list[Item]:
    found = wheel.resolve(module, name)
    ours = getattr(ours_mod, name, None)
    if ours is None:
        return [Item(scope, name, False, "missing")]
    if found is None:
        return [Item(scope, name, True, "(definition not found in the wheel; name present)")]
    where, node = found
    if isinstance(node, ast.ClassDef):
        items = compare_class(scope, name, TheirClass(wheel, where, node), ours)
        for attr in _READ_ATTRIBUTES.get((module, name), ()):
            present = inspect.getattr_static(ours, attr, None) is not None
            items.append(Item(scope, f"{name}.{attr} (attribute)", present, "" if present else "missing"))
        return items
    if isinstance(node, (ast.FunctionDef, _Partial)):
        func = node.func if isinstance(node, _Partial) else node
        fixed = node.fixed if isinstance(node, _Partial) else set()
        params = _params(func.args, defaults_for=fixed)
        why = compatible(params, _our_params(ours) or []) if callable(ours) else "not callable here"
        return [Item(scope, f"{name}()", not why, why)]
    if isinstance(node, ast.Module):  # a submodule
        return [Item(scope, name, inspect.ismodule(ours), "" if inspect.ismodule(ours) else "not a module")]
    return [Item(scope, name, True)]


def measure(wheel_path: Path, include_all: bool) -> tuple[list[Item], set[str]]:
    items: list[Item] = []
    counted: set[str] = set()
    with tempfile.TemporaryDirectory() as tmp:
        with zipfile.ZipFile(wheel_path) as zf:
            for info in zf.infolist():
                if info.filename.startswith("nvmath/") and info.filename.endswith((".py", ".pyi")):
                    zf.extract(info, tmp)
        wheel = Wheel(Path(tmp))
        for scope, module, in_scope in SCOPES:
            try:
                ours_mod: Any = importlib.import_module(module)
            except ImportError:  # every name of the scope counts as missing
                ours_mod = None
            if in_scope or include_all:
                counted.add(scope)
            if module == "nvmath._utils":
                names = ["ComputeType", "CudaDataType", "LibraryPropertyType", "get_nvrtc_version"]
            else:
                names = [n for n in wheel.all_names(module) if n not in _SKIP_LINALG]
            for name in names:
                items += compare_name(wheel, scope, module, name, ours_mod)
    items += behaviour_items()
    counted.add(BEHAVIOUR)
    return items, counted


BEHAVIOUR = "behaviour (results, inputs, exceptions)"


def behaviour_items() -> list[Item]:
    """The behaviour probes of ``tools/compat_behaviour.py`` (CPU-only calls as nvmath-python users
    write them), one item each."""
    import importlib.util

    path = Path(__file__).with_name("compat_behaviour.py")
    spec = importlib.util.spec_from_file_location("compat_behaviour", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return [Item(BEHAVIOUR, what, not why, why) for what, why in module.run()]


def report(items: list[Item], counted: set[str], details: bool) -> float:
    by_scope: dict[str, list[Item]] = {}
    for it in items:
        by_scope.setdefault(it.scope, []).append(it)
    print(f"{'scope':42s} {'compatible':>12s} {'share':>8s}")
    total_ok = total = 0
    for scope, group in by_scope.items():
        ok = sum(it.ok for it in group)
        mark = "" if scope in counted else "   (not counted: out of scope)"
        print(f"{scope:42s} {ok:5d} / {len(group):<5d} {100 * ok / len(group):7.1f}%{mark}")
        if scope in counted:
            total_ok += ok
            total += len(group)
    share = 100 * total_ok / total if total else 100.0
    print(f"{'in scope':42s} {total_ok:5d} / {total:<5d} {share:7.1f}%")
    bad = [it for it in items if not it.ok]
    if bad:
        print("\nincompatible:")
        for it in bad:
            print(f"  [{it.scope}] {it.what}: {it.why}")
    if details:
        print("\ncompared:")
        for it in items:
            print(f"  [{it.scope}] {it.what}: {'ok' if it.ok else 'NO'} {it.why}")
    return share


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wheel", type=Path, default=DEFAULT_WHEEL, help="nvmath-python 1.0 wheel")
    parser.add_argument("--all", action="store_true", help="count the generic nvmath.linalg names too")
    parser.add_argument("--details", action="store_true", help="list every compared item")
    args = parser.parse_args(argv)
    if not args.wheel.exists():
        print(f"nvmath-python 1.0 wheel not found: {args.wheel} ({WHEEL_HINT})", file=sys.stderr)
        return 2
    items, counted = measure(args.wheel, args.all)
    share = report(items, counted, args.details)
    return 0 if share >= 100.0 else 1


if __name__ == "__main__":
    sys.exit(main())
