"""What the kernels hold between two ends of a loopback TCP connection,
measured: the bounds of back-pressure tests count it instead of assuming
it (a loopback socket's buffers may take far more than their sizes say,
and a send buffer the test did not shrink grows by itself)."""

from __future__ import annotations

import array
import fcntl
import sys
import termios

import pytest


def kernel_queued(sender_fd: int, reader_fd: int) -> int:
    """Bytes the kernels hold from ``sender_fd`` to ``reader_fd``: the
    sender's send queue (unacknowledged, SIOCOUTQ) and the reader's receive
    queue (unread, FIONREAD). Read in that order, a byte passing from one
    to the other meanwhile counts twice, never not at all."""
    if not sys.platform.startswith("linux"):
        pytest.skip("measuring a socket's send queue needs SIOCOUTQ (Linux)")
    queued = 0
    for fd, request in ((sender_fd, termios.TIOCOUTQ), (reader_fd, termios.FIONREAD)):
        count = array.array("i", [0])
        fcntl.ioctl(fd, request, count)
        queued += count[0]
    return queued
