"""``python -m sansrs.trace``: output and exit codes, in-process and as a module."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest

from sansrs.rsocket import (
    PayloadFrame,
    RequestNFrame,
    SetupFrame,
    encode_frame_prefixed,
)
from sansrs.trace import Direction, TraceWriter, read_trace
from sansrs.trace._cli import EXIT_INVALID, EXIT_OK, EXIT_UNREADABLE, main

TRACES = Path(__file__).resolve().parent.parent / "traces"
C2S, S2C = Direction.CLIENT_TO_SERVER, Direction.SERVER_TO_CLIENT

SETUP = encode_frame_prefixed(SetupFrame(500, 60000, "text/plain", "text/plain"))
GOOD = encode_frame_prefixed(PayloadFrame(1, b"hello", next=True))
# REQUEST_N with n = 0 (spec: REQUEST_N must be > 0): invalid, but framed.
BAD_REQUEST_N = b"\x00\x00\x0a" + b"\x00\x00\x00\x01" + b"\x20\x00" + b"\x00\x00\x00\x00"
# Unknown frame type 0x10 without the I flag: a connection error.
UNKNOWN = b"\x00\x00\x06" + b"\x00\x00\x00\x00" + b"\x40\x00"
# Unknown frame type with the I flag: ignorable, valid.
IGNORABLE = b"\x00\x00\x06" + b"\x00\x00\x00\x00" + b"\x42\x00"


def _run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(list(argv), out=out)
    return code, out.getvalue()


def _trace(path: Path, c2s: list[bytes], s2c: list[bytes] = ()) -> Path:  # type: ignore[assignment]
    with TraceWriter(path, {"protocol": "rsocket", "framing": "length-prefixed"}) as w:
        t = 0.0
        for chunk in c2s:
            t += 0.001
            w.write_data(C2S, t, chunk)
        for chunk in s2c:
            t += 0.001
            w.write_data(S2C, t, chunk)
        w.write_end(C2S, t)
        w.write_end(S2C, t)
    return path


def test_cli_decode_recorded_trace_prints_every_frame() -> None:
    code, out = _run("decode", str(TRACES / "request_stream.rstrace"))
    assert code == EXIT_OK
    lines = [line for line in out.splitlines() if not line.startswith("#")]
    assert len(lines) == 9  # SETUP, REQUEST_STREAM, 2 REQUEST_N, 5 PAYLOAD
    assert "SETUP" in lines[0] and "C->S" in lines[0] and "sid=0" in lines[0]
    assert any("REQUEST_STREAM" in line and "n=2" in line for line in lines)
    assert any('d="item-4"' in line and "flags=0x060 CN" in line for line in lines)
    assert out.splitlines()[-1] == "# 0 invalid frame(s)"


def test_cli_decode_every_recorded_trace_is_valid() -> None:
    for path in sorted(TRACES.glob("*.rstrace")):
        code, out = _run("decode", str(path))
        assert code == EXIT_OK, out


def test_cli_flags_invalid_frames_and_continues(tmp_path: Path) -> None:
    path = _trace(tmp_path / "bad.rstrace", [SETUP + BAD_REQUEST_N, UNKNOWN + IGNORABLE + GOOD])
    code, out = _run("decode", str(path))
    assert code == EXIT_INVALID
    lines = [line for line in out.splitlines() if not line.startswith("#")]
    assert len(lines) == 5
    assert "REQUEST_N" in lines[1] and "INVALID CONNECTION_ERROR(0x101)" in lines[1]
    assert "UNKNOWN(0x10)" in lines[2] and "INVALID" in lines[2]
    assert "ignored (I flag)" in lines[3] and "INVALID" not in lines[3]
    assert "PAYLOAD" in lines[4] and 'd="hello"' in lines[4] and "INVALID" not in lines[4]
    assert "# 2 invalid frame(s)" in out


def test_cli_reports_lost_framing_and_truncated_frames(tmp_path: Path) -> None:
    # A length of 2 (shorter than a header) loses the frame boundaries; the
    # other direction ends inside a frame.
    path = _trace(tmp_path / "lost.rstrace", [GOOD + b"\x00\x00\x02zz" + GOOD], [GOOD[:-2]])
    code, out = _run("decode", str(path))
    assert code == EXIT_INVALID
    assert "cannot find the next frame" in out
    assert "stream ended inside a frame" in out
    assert "# 2 invalid frame(s)" in out


def test_cli_setup_with_bad_fields_reports_invalid_setup(tmp_path: Path) -> None:
    setup = bytearray(SETUP)
    setup[3 + 6 + 4 : 3 + 6 + 8] = b"\x00\x00\x00\x00"  # keepalive interval 0
    path = _trace(tmp_path / "setup.rstrace", [bytes(setup)])
    code, out = _run("decode", str(path))
    assert code == EXIT_INVALID
    assert "INVALID INVALID_SETUP(0x1)" in out


def test_cli_raw_byte_stream(tmp_path: Path) -> None:
    raw = tmp_path / "c2s.bin"
    raw.write_bytes(read_trace(TRACES / "fragmented.rstrace").data(C2S))
    code, out = _run("decode", "--raw", str(raw))
    assert code == EXIT_OK
    assert out.count("PAYLOAD") == 11 and "flags=0x0a0 FN" in out
    raw.write_bytes(SETUP + BAD_REQUEST_N + GOOD)
    code, out = _run("decode", "--raw", "--preview", "0", str(raw))
    assert code == EXIT_INVALID and ' d="' not in out


def test_cli_max_frame_size_option(tmp_path: Path) -> None:
    raw = tmp_path / "c2s.bin"
    raw.write_bytes(GOOD)
    assert _run("decode", "--raw", "--max-frame-size", "8", str(raw))[0] == EXIT_INVALID


def test_cli_chunks_option_prints_records() -> None:
    code, out = _run("decode", "--chunks", str(TRACES / "request_response.rstrace"))
    assert code == EXIT_OK
    assert "C->S chunk" in out and "S->C end (EOF)" in out


def test_cli_unreadable_files_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = (TRACES / "request_response.rstrace").read_bytes()
    truncated = tmp_path / "t.rstrace"
    truncated.write_bytes(good[:-10])
    code, out = _run("decode", str(truncated))
    assert code == EXIT_UNREADABLE
    assert "SETUP" in out  # frames before the damage are still shown
    assert "truncated" in capsys.readouterr().err
    assert _run("decode", str(tmp_path / "missing"))[0] == EXIT_UNREADABLE
    assert _run("info", str(truncated))[0] == EXIT_UNREADABLE


def test_cli_help_and_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert _run("--help")[0] == 0
    assert "decode" in capsys.readouterr().out
    assert _run("decode", "--help")[0] == 0
    assert "--raw" in capsys.readouterr().out
    assert _run()[0] == 2
    assert _run("frobnicate")[0] == 2


def test_cli_info_counts_frames() -> None:
    code, out = _run("info", str(TRACES / "request_channel.rstrace"))
    assert code == EXIT_OK
    assert '"exchange": "request_channel"' in out
    assert "C->S:" in out and "PAYLOAD=2" in out and "REQUEST_CHANNEL=1" in out
    assert "invalid frames: 0" in out


def test_cli_info_invalid_exit_1(tmp_path: Path) -> None:
    path = _trace(tmp_path / "bad.rstrace", [SETUP + BAD_REQUEST_N])
    code, out = _run("info", str(path))
    assert code == EXIT_INVALID and "INVALID=1" in out


def test_cli_as_python_module(tmp_path: Path) -> None:
    ok = subprocess.run(
        [sys.executable, "-m", "sansrs.trace", "decode", str(TRACES / "cancel.rstrace")],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert ok.returncode == 0, ok.stderr
    assert "CANCEL" in ok.stdout
    bad = _trace(tmp_path / "bad.rstrace", [SETUP + BAD_REQUEST_N])
    failed = subprocess.run(
        [sys.executable, "-m", "sansrs.trace", "decode", str(bad)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert failed.returncode == 1 and "INVALID" in failed.stdout


def test_cli_request_n_frame_is_what_the_bytes_say() -> None:
    # Guard for the hand-built invalid frame above: with n=1 it is valid.
    from sansrs.rsocket import decode_frame

    assert decode_frame(BAD_REQUEST_N[3:-1] + b"\x01") == RequestNFrame(1, 1)


def test_cli_message_framing_takes_each_chunk_as_one_frame(tmp_path: Path) -> None:
    path = tmp_path / "ws.rstrace"
    with TraceWriter(path, {"protocol": "rsocket", "framing": "message"}) as w:
        w.write_data(C2S, 0.0, SETUP[3:])
        w.write_data(C2S, 0.1, GOOD[3:])
        w.write_data(S2C, 0.2, BAD_REQUEST_N[3:])
    code, out = _run("decode", str(path))
    assert code == EXIT_INVALID
    lines = [line for line in out.splitlines() if not line.startswith("#")]
    assert ["SETUP" in lines[0], "PAYLOAD" in lines[1], "INVALID" in lines[2]] == [True] * 3
