"""The compiled page walk (worker/engine/page/_walk.pyx); everything else is in pyproject.toml.

The extension is optional: without a C compiler the package installs without it and
worker.fastwalk falls back to the Python walk (same results, slower; `detemplate bench`
says which walk ran).
"""

from Cython.Build import cythonize
from setuptools import Extension, setup

extensions = [Extension("worker.engine.page._walk", ["worker/engine/page/_walk.pyx"], optional=True, extra_compile_args=["-O3"])]

setup(ext_modules=cythonize(extensions, language_level=3, quiet=True))
