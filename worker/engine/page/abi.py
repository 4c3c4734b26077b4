"""The compiled walk's ABI: the one number that ties page/_walk.pyx to the Python that loads it.

setup.py compiles it into the extension (the C macro DETEMPLATE_WALK_ABI, which _walk.pyx
exports as `ABI`), and compiled.py uses the extension only when the two agree: bump it on
every change of _walk.pyx's Python interface, and a stale build is refused, not misused.
"""

ABI = 48
