"""The package layout and the compiled page walk; everything else is in pyproject.toml.

The source folder worker/ installs and imports as `detemplate` (its subpackages are
listed here from the folder, so a new one needs no edit). The extension
(worker/engine/page/_walk.pyx) is optional: without a C compiler the package installs
without it and the Python walk runs (same results, slower; `detemplate bench` says which
walk ran).
"""

import re
import sys
from pathlib import Path

from Cython.Build import cythonize
from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

# The compiled walk's ABI is written once, in worker/engine/page/abi.py; the extension gets
# it as a C macro, so a build always says which source it was made from.
ABI_FILE = "worker/engine/page/abi.py"
ABI = re.search(r"^ABI = (\d+)$", (Path(__file__).parent / ABI_FILE).read_text(encoding="utf-8"), re.M)
assert ABI is not None, f"no ABI in {ABI_FILE}"

PACKAGES = ["detemplate" + name[len("worker") :] for name in find_packages(include=["worker", "worker.*"])]
# The page-level model's shipped weights: a folder of data (no module), listed so that setuptools
# ships it as a package of its own rather than warn that it would ignore it.
PACKAGES.append("detemplate.engine.detectors.data")

extensions = [
    Extension(
        "detemplate.engine.page._walk",
        ["worker/engine/page/_walk.pyx"],
        depends=[ABI_FILE],
        define_macros=[("DETEMPLATE_WALK_ABI", ABI.group(1))],
        optional=True,
        # No fused multiply-add: the page-level features must be numpy's doubles, bit for bit.
        extra_compile_args=["-O3", "-ffp-contract=off"],
    )
]



# cythonize returns new Extension objects without `optional`: the optional ones by name.
OPTIONAL = {e.name for e in extensions if e.optional}


class OptionalBuildExt(build_ext):
    """Builds the compiled walk when a C compiler works, and else leaves it out with a warning.

    setuptools' own `optional=True` never applied: cythonize's Extension objects leave it out,
    so an install without a compiler (no gcc or cc on PATH, CC naming a missing program)
    failed."""

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:  # any failure to compile or link: the Python walk runs instead
            if ext.name not in OPTIONAL:
                raise
            print(
                f"WARNING: the compiled page walk ({ext.name}) was not built ({exc}); detemplate installs "
                "without it and runs the Python walk (same results, slower). Install a C compiler and "
                "reinstall for the compiled one.",
                file=sys.stderr,
            )


setup(
    package_dir={"detemplate": "worker"},
    packages=PACKAGES,
    ext_modules=cythonize(extensions, language_level=3, quiet=True),
    cmdclass={"build_ext": OptionalBuildExt},
)
