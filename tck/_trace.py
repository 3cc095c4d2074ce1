"""Where the implementation was when something went wrong: its frames, not the kit's.

A failure report shows the implementation's own code: the frames that called a
kit Subscriber (``signalled from``), the traceback of an exception it raised or
signalled, and, when a test runs past its deadline, the stacks of the threads
that are still running. Kit frames (this package) and the plumbing of the
standard library's ``threading`` are left out, so the first line shown is the
user's.

Frames are captured as plain ``(filename, lineno, name)`` tuples: cheap enough
to take on every signal, and they keep no reference to a frame's locals (a kept
frame would keep a cancelled Subscriber alive and break the rule 3.13 check).
"""

from __future__ import annotations

import inspect
import linecache
import os
import sys
import threading
from collections.abc import Iterable
from types import FrameType, TracebackType

__all__ = [
    "Site",
    "caller_site",
    "describe_definition",
    "format_exception",
    "format_site",
    "format_thread_stacks",
    "is_kit_file",
]

#: One frame: file, line, function.
Frame = tuple[str, int, str]
#: A call site, innermost frame first.
Site = tuple[Frame, ...]

_KIT_DIR = os.path.dirname(os.path.abspath(__file__))
_THREADING = os.path.abspath(threading.__file__)
_MAX_FRAMES = 12


def is_kit_file(filename: str) -> bool:
    """True for this package's modules (and ``threading``'s plumbing)."""
    path = os.path.abspath(filename)
    return path == _THREADING or os.path.dirname(path) == _KIT_DIR


def caller_site(skip: int = 1, limit: int = _MAX_FRAMES) -> Site:
    """The implementation frames that led to the current kit call, innermost first.

    Leading kit frames are skipped; collection stops at the next kit frame
    (the kit's call into the implementation that started the chain).
    """
    frame: FrameType | None = sys._getframe(skip)
    while frame is not None and is_kit_file(frame.f_code.co_filename):
        frame = frame.f_back
    site: list[Frame] = []
    while frame is not None and len(site) < limit:
        code = frame.f_code
        if is_kit_file(code.co_filename):
            break
        site.append((code.co_filename, frame.f_lineno, code.co_name))
        frame = frame.f_back
    return tuple(site)


def _format_frames(frames: Iterable[Frame], indent: str) -> list[str]:
    lines: list[str] = []
    for filename, lineno, name in frames:
        lines.append(f'{indent}File "{filename}", line {lineno}, in {name}')
        source = linecache.getline(filename, lineno).strip()
        if source:
            lines.append(f"{indent}  {source}")
    return lines


def format_site(site: Site, indent: str = "    ") -> str:
    """A call site as traceback lines, innermost last (as Python prints them)."""
    return "\n".join(_format_frames(reversed(site), indent))


def _traceback_frames(tb: TracebackType | None) -> list[Frame]:
    frames: list[Frame] = []
    while tb is not None:
        code = tb.tb_frame.f_code
        frames.append((code.co_filename, tb.tb_lineno, code.co_name))
        tb = tb.tb_next
    return frames


def format_exception(error: BaseException, indent: str = "    ") -> str:
    """``error`` and its traceback without kit frames (empty if it was never raised).

    Chained causes are included, so an error wrapped by the implementation still
    shows where the original was raised.
    """
    parts: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        frames = [f for f in _traceback_frames(current.__traceback__) if not is_kit_file(f[0])]
        if frames:
            lines = _format_frames(frames, indent)
            lines.append(f"{indent}{type(current).__name__}: {current}")
            parts.append("\n".join(lines))
        current = current.__cause__ or current.__context__
    return f"\n{indent}(caused by)\n".join(reversed(parts))


def format_thread_stacks(exclude: set[int], first: int | None = None,
                         limit: int = _MAX_FRAMES, threads: int = 16) -> str:
    """Live threads' stacks but ``exclude``'s (``first`` is listed first), at most ``threads``."""
    frames = sys._current_frames()
    names = {thread.ident: thread.name for thread in threading.enumerate()}
    order = sorted(frames, key=lambda ident: (ident != first, names.get(ident, "")))
    blocks: list[str] = []
    for ident in order:
        if ident in exclude:
            continue
        if len(blocks) == threads:
            blocks.append(f"  ... and {len(frames) - len(exclude) - threads} more threads")
            break
        stack: list[Frame] = []
        frame: FrameType | None = frames[ident]
        while frame is not None:
            code = frame.f_code
            stack.append((code.co_filename, frame.f_lineno, code.co_name))
            frame = frame.f_back
        stack = stack[:limit]
        title = f'  thread "{names.get(ident, ident)}" (innermost last):'
        blocks.append("\n".join([title, *_format_frames(reversed(stack), "    ")]))
    return "\n".join(blocks)


def describe_definition(subject: object, indent: str = "    ") -> str:
    """Where ``subject``'s class is defined: the code a report can point at when the
    implementation never ran (it never called back, never raised)."""
    cls = subject if isinstance(subject, type) else type(subject)
    try:
        filename = inspect.getsourcefile(cls)
        _, lineno = inspect.getsourcelines(cls)
    except (OSError, TypeError):
        return ""
    if filename is None:
        return ""
    return "\n".join(_format_frames([(filename, lineno, cls.__qualname__)], indent))
