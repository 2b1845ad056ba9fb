"""A message spec as data, as Kafka's generator models it (``Versions``, ``FieldSpec``, ``StructSpec``): version
ranges, fields and structs, and the plan of the fields present at one version that the walks
(:mod:`.readable`, :mod:`.writable`, :mod:`.json_converter`) follow. The format itself is described in
:mod:`.schema`."""

from __future__ import annotations

import struct as _st
from collections.abc import Sequence
from typing import Any, cast

from kafkalog.storage.decoders.common import ZERO_UUID

__all__ = ["NO_VERSIONS", "Field", "Struct", "Versions"]

MAX_VERSION = 0x7FFF
_UNSET: Any = object()

_FIXED: dict[str, _st.Struct] = {
    "int8": _st.Struct(">b"),
    "int16": _st.Struct(">h"),
    "uint16": _st.Struct(">H"),
    "int32": _st.Struct(">i"),
    "uint32": _st.Struct(">I"),
    "int64": _st.Struct(">q"),
    "float64": _st.Struct(">d"),
}
PRIMITIVES = frozenset(_FIXED) | {"bool", "uuid"}
VARLEN = frozenset({"string", "bytes"})


class Versions:
    """An inclusive version range; ``Versions.parse("3+")``, ``"0-4"``, ``"1"``, ``"none"``."""

    __slots__ = ("hi", "lo")

    def __init__(self, lo: int, hi: int):
        self.lo = lo
        self.hi = hi

    @staticmethod
    def parse(spec: str | None) -> Versions:
        if spec is None or spec == "none" or spec == "":
            return NO_VERSIONS
        if spec.endswith("+"):
            return Versions(int(spec[:-1]), MAX_VERSION)
        if "-" in spec:
            lo, hi = spec.split("-", 1)
            return Versions(int(lo), int(hi))
        return Versions(int(spec), int(spec))

    def __contains__(self, v: int) -> bool:
        return self.lo <= v <= self.hi

    def intersect(self, other: Versions) -> Versions:
        return Versions(max(self.lo, other.lo), min(self.hi, other.hi))

    def member(self, v: int, possible: Versions) -> bool:
        """Whether generated code treats version ``v`` as in this range when it was generated for the
        ``possible`` versions (``VersionConditional``): inside ``possible`` this is plain membership; outside
        it (versions a reader does not know), bounds that cover all of ``possible`` are not checked."""
        c, p = self, possible
        if c.lo > c.hi or p.lo > p.hi:
            return False
        if p.lo < c.lo:
            if p.hi > c.hi:
                return c.lo <= v <= c.hi
            if p.hi >= c.lo:
                return v >= c.lo
            return False
        if p.hi >= c.lo and p.lo <= c.hi:
            return v <= c.hi if p.hi > c.hi else True
        return False

    def __repr__(self) -> str:
        if self.lo > self.hi:
            return "none"
        if self.hi == MAX_VERSION:
            return f"{self.lo}+"
        return f"{self.lo}" if self.lo == self.hi else f"{self.lo}-{self.hi}"


NO_VERSIONS = Versions(1, 0)


def _lower_first(name: str) -> str:
    return name[:1].lower() + name[1:]


class Field:
    """One field of a message spec. ``type`` is as in the JSON: ``int32``, ``string``, ``[]int32``,
    ``[]SomeStruct`` or ``SomeStruct`` (struct types need ``fields``). ``default=None`` means ``"null"``."""

    __slots__ = ("_default", "common", "elem", "fields", "key", "kind", "name", "nullable", "struct", "tag",
                 "tagged", "versions")

    def __init__(self, name: str, type: str, versions: str, *, nullable: str | None = None,
                 tagged: str | None = None, tag: int | None = None, default: Any = _UNSET,
                 fields: Sequence[Field] | None = None, common: str | None = None):
        """``common``: the struct is one of the spec's ``commonStructs`` with these versions (Kafka generates
        those classes for their own versions, so they never reject a version; inline structs do)."""
        self.name = name
        self.key = _lower_first(name)
        self.versions = Versions.parse(versions)
        self.nullable = Versions.parse(nullable)
        self.tagged = Versions.parse(tagged)
        self.tag = tag
        if (tag is None) != (tagged is None):
            raise ValueError(f"field {name}: tag and tagged versions go together")
        self.elem: str | None = None
        base = type[2:] if type.startswith("[]") else type
        is_struct = base not in PRIMITIVES and base not in VARLEN
        if type.startswith("[]"):
            self.kind = "array"
            self.elem = "struct" if is_struct else base
        else:
            self.kind = "struct" if is_struct else base
        if is_struct and fields is None:
            raise ValueError(f"field {name}: struct type {base} needs fields")
        self.struct = Struct(base, fields) if is_struct and fields is not None else None
        self.common = Versions.parse(common) if common is not None else None
        self.fields = self.struct.fields if self.struct else ()
        self._default = self._compute_default(default)

    def _compute_default(self, default: Any) -> Any:
        if default is not _UNSET:
            return default
        k = self.kind
        if k == "bool":
            return False
        if k == "uuid":
            return ZERO_UUID
        if k == "float64":
            return 0.0
        if k in _FIXED:
            return 0
        if k == "string":
            return ""
        if k == "bytes":
            return b""
        if k == "array":
            return ()
        return _UNSET  # struct: a default-constructed struct, computed per version

    def default(self, ctx: _Ctx, possible: Versions) -> Any:
        d = self._default
        if d is _UNSET:
            assert self.struct is not None
            return self.struct.defaults(ctx, self.common or possible.intersect(self.versions))
        return list(d) if isinstance(d, tuple) else d

    def is_default(self, value: Any, ctx: _Ctx, possible: Versions) -> bool:
        d = self.default(ctx, possible)
        if isinstance(d, list):
            return isinstance(value, tuple | list) and list(value) == d
        if d is None or value is None or isinstance(d, bool) or isinstance(value, bool):
            return value is d
        return bool(value == d)


class _Ctx:
    """What a read/write/JSON walk needs besides the data: the version and the message's flexible versions."""

    __slots__ = ("flex", "version")

    def __init__(self, version: int, flex: Versions):
        self.version = version
        self.flex = flex


class _Entry:
    __slots__ = ("f", "fixed", "nested", "nested_ok", "nullable", "possible", "tagged")

    def __init__(self, f: Field, tagged: bool, nullable: bool, possible: Versions, version: int,
                 enclosing: Versions):
        self.f = f
        self.tagged = tagged
        self.nullable = nullable
        self.possible = possible  # versions the field's generated code was made for
        self.fixed = _FIXED.get(f.kind)  # fast path for int/float fields
        # a nested struct's class: the versions it was generated for, and whether its read() accepts ``version``
        self.nested = f.common if f.common is not None else possible
        self.nested_ok = f.common is not None or enclosing.member(version, f.versions)


class _Plan:
    __slots__ = ("fields", "flexible", "tagged", "tagged_sorted")

    def __init__(self, fields: list[_Entry], flexible: bool):
        self.fields = fields
        self.flexible = flexible
        self.tagged = {e.f.tag: e for e in fields if e.tagged}
        self.tagged_sorted = sorted(self.tagged.values(), key=lambda e: cast(int, e.f.tag))  # tagged: tag set


class Struct:
    __slots__ = ("_plans", "all_tags", "fields", "name")

    def __init__(self, name: str, fields: Sequence[Field]):
        self.name = name
        self.fields = tuple(fields)
        self._plans: dict[tuple[int, int, int, int, int], _Plan] = {}
        seen: set[int] = set()
        for f in self.fields:
            if f.tag is not None:
                if f.tag in seen:
                    raise ValueError(f"struct {name}: duplicate tag {f.tag}")
                seen.add(f.tag)
        self.all_tags = frozenset(seen)

    def plan(self, ctx: _Ctx, possible: Versions) -> _Plan:
        """Fields present at ``ctx.version`` for code generated for the ``possible`` versions."""
        v = ctx.version
        key = (v, ctx.flex.lo, ctx.flex.hi, possible.lo, possible.hi)
        p = self._plans.get(key)
        if p is None:
            flexible = ctx.flex.member(v, possible)
            chosen = []
            for f in self.fields:
                if not f.versions.member(v, possible):
                    continue
                present = possible.intersect(f.versions)
                tagged = f.tagged.member(v, present)
                if tagged and not flexible:
                    continue
                chosen.append(_Entry(f, tagged, f.nullable.member(v, present), present, v, possible))
            p = _Plan(chosen, flexible)
            if possible.lo <= v <= possible.hi:  # unknown versions (rare, or fuzz) are not cached
                self._plans[key] = p
        return p

    def defaults(self, ctx: _Ctx, possible: Versions) -> dict[str, Any]:
        return {e.f.key: e.f.default(ctx, e.possible) for e in self.plan(ctx, possible).fields}
