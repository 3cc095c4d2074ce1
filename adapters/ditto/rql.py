"""A subset of Ditto's RQL (Resource Query Language), for history and search filters.

Supported: ``eq ne gt ge lt le in like ilike exists and or not``; properties are
slash paths into a JSON object (``attributes/location``, ``thingId``); values
are double-quoted strings (``\\"`` and ``\\\\`` escapes), numbers, ``true``,
``false`` and ``null``. ``like``/``ilike`` take ``*`` (any run) and ``?`` (one
character). A comparison between values of different kinds is false, as in
Ditto's in-memory evaluator. ``parse_rql`` raises :class:`RqlError` for
anything else; nesting is bounded (``MAX_DEPTH``) so no input recurses deep.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, Final

__all__ = ["MAX_DEPTH", "Predicate", "RqlError", "parse_rql"]

MAX_DEPTH: Final = 32
MAX_LENGTH: Final = 64 * 1024

Predicate = Callable[[Any], bool]


class RqlError(ValueError):
    """The filter is not an RQL expression this subset understands."""


_TOKEN = re.compile(
    r"""\s*(?:
        (?P<punct>[(),])
      | (?P<string>"(?:[^"\\]|\\.)*")
      | (?P<word>[^\s(),"]+)
    )""",
    re.VERBOSE | re.DOTALL,
)
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?\Z")
_MISSING: Final = object()


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos, end = 0, len(text)
    while pos < end:
        if text[pos:].isspace():
            break
        match = _TOKEN.match(text, pos)
        if match is None or match.end() == pos:
            raise RqlError(f"unexpected character at {pos}")
        kind = match.lastgroup
        assert kind is not None
        out.append((kind, match.group(kind)))
        pos = match.end()
    return out


def _value(kind: str, text: str) -> Any:
    if kind == "string":
        try:
            return json.loads(text)
        except ValueError:
            raise RqlError(f"invalid string literal {text[:40]}") from None
    if text in ("true", "false", "null"):
        return {"true": True, "false": False, "null": None}[text]
    if _NUMBER.match(text):
        number = float(text) if any(c in text for c in ".eE") else int(text)
        return number
    raise RqlError(f"invalid value {text[:40]!r}")


def _lookup(obj: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(obj, dict) or key not in obj:
            return _MISSING
        obj = obj[key]
    return obj


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "other" if value is not None else "null"


def _compare(op: str, left: Any, right: Any) -> bool:
    if left is _MISSING:
        return op == "ne"
    if op in ("eq", "ne"):
        same = _kind(left) == _kind(right) and left == right
        return same if op == "eq" else not same
    kind = _kind(left)
    if kind != _kind(right) or kind not in ("number", "string"):
        return False
    if op == "gt":
        return bool(left > right)
    if op == "ge":
        return bool(left >= right)
    if op == "lt":
        return bool(left < right)
    return bool(left <= right)


def _wildcard_match(pattern: str, text: str) -> bool:
    """``*`` / ``?`` matching in O(len(pattern) * len(text)) at worst: the
    two-pointer method, never a backtracking regex a filter could blow up."""
    p = t = 0
    star, mark = -1, 0
    while t < len(text):
        if p < len(pattern) and pattern[p] in ("?", text[t]):
            p += 1
            t += 1
        elif p < len(pattern) and pattern[p] == "*":
            star, mark = p, t
            p += 1
        elif star >= 0:
            p = star + 1
            mark += 1
            t = mark
        else:
            return False
    return all(c == "*" for c in pattern[p:])


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = _tokens(text)
        self.pos = 0

    def take(self) -> tuple[str, str]:
        if self.pos >= len(self.tokens):
            raise RqlError("unexpected end of the expression")
        token = self.tokens[self.pos]
        self.pos += 1
        return token

    def expect(self, punct: str) -> None:
        if self.take() != ("punct", punct):
            raise RqlError(f"expected {punct!r}")

    def query(self, depth: int) -> Predicate:
        if depth > MAX_DEPTH:
            raise RqlError(f"expression nested deeper than {MAX_DEPTH}")
        kind, op = self.take()
        if kind != "word":
            raise RqlError("expected an operator")
        self.expect("(")
        if op in ("and", "or"):
            parts = [self.query(depth + 1)]
            while self.take() == ("punct", ","):
                parts.append(self.query(depth + 1))
            self.pos -= 1
            self.expect(")")
            if op == "and":
                return lambda obj: all(p(obj) for p in parts)
            return lambda obj: any(p(obj) for p in parts)
        if op == "not":
            inner = self.query(depth + 1)
            self.expect(")")
            return lambda obj: not inner(obj)
        path = self.property()
        if op == "exists":
            self.expect(")")
            return lambda obj: _lookup(obj, path) is not _MISSING
        values = []
        while True:
            self.expect(",")
            values.append(_value(*self.take()))
            if self.tokens[self.pos : self.pos + 1] == [("punct", ")")]:
                self.pos += 1
                break
            if op != "in":
                raise RqlError(f"{op} takes one value")
        if op == "in":
            return lambda obj: any(_compare("eq", _lookup(obj, path), v) for v in values)
        (value,) = values
        if op in ("like", "ilike"):
            if not isinstance(value, str):
                raise RqlError(f"{op} needs a string pattern")
            fold = op == "ilike"
            pattern = value.casefold() if fold else value

            def like(obj: Any) -> bool:
                found = _lookup(obj, path)
                if not isinstance(found, str):
                    return False
                return _wildcard_match(pattern, found.casefold() if fold else found)

            return like
        if op not in ("eq", "ne", "gt", "ge", "lt", "le"):
            raise RqlError(f"unknown operator {op[:40]!r}")
        return lambda obj: _compare(op, _lookup(obj, path), value)

    def property(self) -> tuple[str, ...]:
        kind, text = self.take()
        if kind != "word" or not text:
            raise RqlError("expected a property")
        return tuple(part for part in text.split("/") if part)


def parse_rql(text: str) -> Predicate:
    """Compile ``text`` into a predicate over a JSON object; :class:`RqlError` if invalid."""
    if len(text) > MAX_LENGTH:
        raise RqlError(f"expression longer than {MAX_LENGTH} characters")
    parser = _Parser(text)
    predicate = parser.query(1)
    if parser.pos != len(parser.tokens):
        raise RqlError("unexpected text after the expression")
    return predicate
