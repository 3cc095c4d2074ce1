"""The one thing pyproject.toml cannot say yet without an experimental
table: the optional C extension (RFC 6455 masking, docs/adapters.md,
"Masking in C"). Built when a C compiler and the Python headers are there;
``optional=True``, so an install without them goes on with the pure-Python
paths (the same bytes, slower)."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "sansrs.adapters.transport.websocket._speedups",
            sources=["adapters/transport/websocket/_speedups.c"],
            optional=True,
        )
    ]
)
