"""The package layout and the compiled page walk; everything else is in pyproject.toml.

The source folder worker/ installs and imports as `detemplate` (its subpackages are
listed here from the folder, so a new one needs no edit). The extension
(worker/engine/page/_walk.pyx) is optional: without a C compiler the package installs
without it and the Python walk runs (same results, slower; `detemplate bench` says which
walk ran).
"""

from Cython.Build import cythonize
from setuptools import Extension, find_packages, setup

PACKAGES = ["detemplate" + name[len("worker") :] for name in find_packages(include=["worker", "worker.*"])]

extensions = [
    Extension(
        "detemplate.engine.page._walk",
        ["worker/engine/page/_walk.pyx"],
        optional=True,
        extra_compile_args=["-O3"],
    )
]

setup(
    package_dir={"detemplate": "worker"},
    packages=PACKAGES,
    ext_modules=cythonize(extensions, language_level=3, quiet=True),
)
