"""Keyword arguments a public function forwards to an options class
(``connect(url, **setup)`` -> ``EngineOptions``): a keyword neither takes is
a TypeError naming the public function and its nearest parameter, never the
internal class it was forwarded to."""

from __future__ import annotations

import dataclasses
import difflib
import inspect
from collections.abc import Callable, Collection, Mapping
from typing import Any

__all__ = ["check_keywords"]


def check_keywords(
    function: Callable[..., Any],
    keywords: Mapping[str, Any],
    into: Any,
    *,
    hint: Mapping[str, str] | None = None,
) -> None:
    """Raise TypeError if ``keywords`` (what ``function`` took as ``**kw``)
    has a name that neither ``function`` nor the dataclass ``into`` takes.
    ``hint``: a message for a name users commonly try (``timeout``)."""
    known = {f.name for f in dataclasses.fields(into) if f.init}
    unknown = sorted(set(keywords) - known)
    if unknown:
        raise TypeError(_unexpected(function, unknown[0], known, hint or {}))


def _unexpected(
    function: Callable[..., Any], name: str, known: Collection[str], hint: Mapping[str, str]
) -> str:
    own = [
        p.name
        for p in inspect.signature(function).parameters.values()
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    ]
    public = own + sorted(known)
    message = f"{function.__name__}() got an unexpected keyword argument {name!r}"
    if name in hint:
        return f"{message}; {hint[name]}"
    near = difflib.get_close_matches(name, public, n=1)
    if near:
        return f"{message}; did you mean {near[0]}=?"
    return f"{message}; it takes {', '.join(public)}"
