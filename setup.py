"""The optional C extension; everything else is in pyproject.toml.

``optional=True``: where no compiler is at hand the build still succeeds and
otel-stall runs on its pure-Python path, which gives the same signatures.
The extension only canonicalises; hashing is the ``xxhash`` package's.

Such a wheel holds no compiled code, so it is tagged ``py3-none-any``, not
with this platform's tag (issue 29): the wheel command decides purity from
what was declared, so it is told what was built.
"""

import os

from setuptools import Extension, setup
from setuptools.command.bdist_wheel import bdist_wheel


class BdistWheel(bdist_wheel):
    """A wheel that is pure when the optional extension did not build."""

    def run_command(self, command: str) -> None:
        """Run ``command``; after the build, the wheel is pure unless the extension exists."""
        super().run_command(command)
        if command == "build":
            build_ext = self.get_finalized_command("build_ext")
            built = all(
                os.path.exists(build_ext.get_ext_fullpath(ext.name)) for ext in build_ext.extensions
            )
            self.root_is_pure = not built


setup(
    cmdclass={"bdist_wheel": BdistWheel},
    ext_modules=[
        Extension(
            "otel_stall.core._canon",
            sources=["otel_stall/core/_canon.c"],
            optional=True,
        ),
    ],
)
