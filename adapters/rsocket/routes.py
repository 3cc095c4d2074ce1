"""Route templates and the table a router matches routes against.

A template is a route with ``{name}`` variables, as Spring's destination
variables: ``users.{id}.get`` matches ``users.42.get`` with ``id="42"``. A
``{name}`` matches one segment (no ``.`` and no ``/``); ``{name:REGEX}``
matches what ``REGEX`` does. Plain routes are found with one dict lookup;
templates are tried most specific first (more literal text, then fewer
variables), so ``users.me.get`` wins over ``users.{id}.get`` for
``users.me.get``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Generic, TypeVar

__all__ = ["RouteTable", "Template", "expand"]

T = TypeVar("T")
_VAR = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)(?::((?:[^{}]|\{[^{}]*\})+))?\}")
NO_VARIABLES: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Template:
    """A compiled route template."""

    route: str
    pattern: re.Pattern[str] | None  # None: a plain route
    variables: tuple[str, ...]
    literal_length: int

    @classmethod
    def compile(cls, route: str) -> Template:
        if not isinstance(route, str) or not route:
            raise ValueError(f"a route is a non-empty string, not {route!r}")
        parts = []
        names: list[str] = []
        last = 0
        for m in _VAR.finditer(route):
            parts.append(_literal(route[last : m.start()], route))
            name, regex = m.group(1), m.group(2)
            if name in names:
                raise ValueError(f"variable {{{name}}} twice in route {route!r}")
            names.append(name)
            parts.append(f"(?P<{name}>{regex if regex else '[^./]+'})")
            last = m.end()
        rest = _literal(route[last:], route)
        if not names:
            return cls(route, None, (), len(route))
        parts.append(rest)
        try:
            pattern = re.compile("".join(parts))
        except re.error as exc:
            raise ValueError(f"bad variable pattern in route {route!r}: {exc}") from None
        literal = len(_VAR.sub("", route))
        return cls(route, pattern, tuple(names), literal)

    def match(self, route: str) -> Mapping[str, str] | None:
        if self.pattern is None:
            return NO_VARIABLES if route == self.route else None
        m = self.pattern.fullmatch(route)
        return None if m is None else m.groupdict()


def _literal(text: str, route: str) -> str:
    if "{" in text or "}" in text:
        raise ValueError(f"unbalanced braces in route {route!r}")
    return re.escape(text)


class RouteTable(Generic[T]):
    """Routes -> values: plain routes in a dict, templates in specificity order."""

    __slots__ = ("_plain", "_templates")

    def __init__(self) -> None:
        self._plain: dict[str, T] = {}
        self._templates: list[tuple[Template, T]] = []

    def add(self, route: str, value: T) -> None:
        template = Template.compile(route)
        if route in self._plain or any(t.route == route for t, _ in self._templates):
            raise ValueError(f"route {route!r} is already registered")
        if template.pattern is None:
            self._plain[route] = value
            return
        self._templates.append((template, value))
        self._templates.sort(key=lambda tv: (-tv[0].literal_length, len(tv[0].variables)))

    def match(self, route: str) -> tuple[T, Mapping[str, str]] | None:
        value = self._plain.get(route)
        if value is not None:
            return value, NO_VARIABLES
        for template, candidate in self._templates:
            variables = template.match(route)
            if variables is not None:
                return candidate, MappingProxyType(variables)
        return None

    def routes(self) -> list[str]:
        return [*self._plain, *(t.route for t, _ in self._templates)]

    def __bool__(self) -> bool:
        return bool(self._plain or self._templates)


def expand(route: str, variables: tuple[object, ...]) -> str:
    """Fill a template's variables in order (``expand("users.{id}", (42,))``),
    as Spring's ``route("users.{id}", 42)`` does."""
    names = list(_VAR.finditer(route))
    if len(names) != len(variables):
        raise ValueError(
            f"route {route!r} has {len(names)} variable(s), {len(variables)} value(s) given"
        )
    if not names:
        return route
    out = []
    last = 0
    for m, value in zip(names, variables, strict=True):
        out.append(route[last : m.start()])
        out.append(str(value))
        last = m.end()
    out.append(route[last:])
    return "".join(out)
