"""The optional C extension; everything else is in pyproject.toml.

``optional=True``: where no compiler is at hand the build still succeeds and
otel-stall runs on its pure-Python path, which gives the same signatures.
The extension only canonicalises; hashing is the ``xxhash`` package's.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "otel_stall.core._canon",
            sources=["otel_stall/core/_canon.c"],
            optional=True,
        ),
    ]
)
