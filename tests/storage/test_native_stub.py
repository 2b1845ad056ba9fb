"""The typed stub ``storage/_native.pyi`` names exactly what the compiled core exports, with the same parameters:
a function, class, method or parameter added to, renamed in or removed from ``storage/native/src`` without the
stub (or the other way round) fails here."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from kafkalog.compat.pytest_plugin import in_ci

try:
    from kafkalog.storage import _native as core
except ImportError as e:  # not built (no cargo at install time): nothing to compare; under CI=true a failure
    if in_ci():
        raise
    pytest.skip(f"the compiled record core is not built ({e})", allow_module_level=True)

STUB = Path(core.__file__).with_name("_native.pyi")


def _public(name: str) -> bool:
    return not name.startswith("_")


def _stub() -> ast.Module:
    return ast.parse(STUB.read_text(), filename=str(STUB))


def _params(fn: ast.FunctionDef) -> list[tuple[str, bool]]:
    """``(name, has a default)`` of each parameter of a stub ``def``, without ``self``/``cls``."""
    args = fn.args.posonlyargs + fn.args.args
    defaults = [False] * (len(args) - len(fn.args.defaults)) + [True] * len(fn.args.defaults)
    got = [(a.arg, d) for a, d in zip(args, defaults, strict=True)]
    got += [(a.arg, d is not None) for a, d in zip(fn.args.kwonlyargs, fn.args.kw_defaults, strict=True)]
    return got[1:] if got and got[0][0] in ("self", "cls") else got


def _runtime_params(obj) -> list[tuple[str, bool]]:
    sig = inspect.signature(obj)
    return [(p.name, p.default is not inspect.Parameter.empty) for p in sig.parameters.values()]


def _defs(body: list[ast.stmt]) -> dict[str, list[ast.FunctionDef]]:
    """The ``def``s of a stub body by name (an ``@overload``ed function has several)."""
    out: dict[str, list[ast.FunctionDef]] = {}
    for node in body:
        if isinstance(node, ast.FunctionDef):
            out.setdefault(node.name, []).append(node)
    return out


def _classes(tree: ast.Module) -> dict[str, ast.ClassDef]:
    return {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}


def _stub_names(body: list[ast.stmt]) -> set[str]:
    names = set(_defs(body)) | {n.name for n in body if isinstance(n, ast.ClassDef)}
    names |= {n.target.id for n in body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
    names |= {t.id for n in body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    return {n for n in names if _public(n)}


def test_the_stub_ships_next_to_the_module():
    assert STUB.is_file(), STUB
    assert (STUB.parent / "py.typed").is_file()


def test_the_stub_names_exactly_what_the_module_exports():
    exported = {n for n in dir(core) if _public(n)}
    assert _stub_names(_stub().body) == exported
    assert set(core.__all__) == exported


def test_each_class_has_exactly_its_public_members():
    classes = _classes(_stub())
    for name, node in classes.items():
        runtime = {n for n in vars(getattr(core, name)) if _public(n)}
        assert _stub_names(node.body) == runtime, name


@pytest.mark.parametrize("name", sorted(n for n in dir(core) if _public(n) and inspect.isbuiltin(getattr(core, n))))
def test_function_parameters_match(name):
    defs = _defs(_stub().body)[name]
    want = _runtime_params(getattr(core, name))
    for d in defs:  # every overload takes the same parameters
        assert _params(d) == want, (name, d.lineno)


def test_method_and_constructor_parameters_match():
    for name, node in _classes(_stub()).items():
        cls = getattr(core, name)
        defs = _defs(node.body)
        for meth, [d] in defs.items():
            if meth == "__new__":
                assert _params(d) == _runtime_params(cls), name
            elif meth in vars(cls) and inspect.ismethoddescriptor(vars(cls)[meth]) \
                    and not meth.startswith("__"):
                assert _params(d) == _runtime_params(getattr(cls, meth))[1:], (name, meth)
        if "__new__" not in defs:  # no constructor in the stub: none in the module either
            with pytest.raises(TypeError):
                cls()


def test_the_parser_sees_a_drift(tmp_path):
    """The comparison is not vacuous: a stub missing a function, or with a renamed parameter, differs."""
    tree = _stub()
    exported = {n for n in dir(core) if _public(n)}
    body = [n for n in tree.body if not (isinstance(n, ast.FunctionDef) and n.name == "scan_crc")]
    assert _stub_names(body) == exported - {"scan_crc"}
    [scan] = _defs(tree.body)["scan_crc"]
    scan.args.args[0].arg = "data"
    assert _params(scan) != _runtime_params(core.scan_crc)
