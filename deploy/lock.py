"""Write deploy/constraints.txt: the exact versions installed in this environment of every
package the image needs (detemplate's dependencies and its `stream` extra, transitively).

    .venv/bin/python deploy/lock.py > deploy/constraints.txt
"""

from __future__ import annotations

import re
import tomllib
from importlib.metadata import distribution
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement

EXTRAS = ("stream",)


def _key(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def main() -> None:
    project = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml").read_text())["project"]
    roots = [Requirement(r) for r in project["dependencies"]]
    for extra in EXTRAS:
        roots += [Requirement(r) for r in project["optional-dependencies"][extra]]
    env = default_environment()
    pinned: dict[str, str] = {}

    def walk(req: Requirement) -> None:
        pinned[_key(req.name)] = distribution(req.name).version
        for text in distribution(req.name).requires or []:
            sub = Requirement(text)
            wanted = sub.marker is None or any(
                sub.marker.evaluate({**env, "extra": extra}) for extra in ("", *req.extras)
            )
            if wanted and (_key(sub.name) not in pinned or sub.extras):
                walk(sub)

    for req in roots:
        walk(req)
    print("# Exact versions of the image's runtime packages (detemplate[stream] and all it pulls in), as tested.")
    print("# deploy/build.sh installs with -c this file.")
    print("# Regenerate: .venv/bin/python deploy/lock.py > deploy/constraints.txt")
    for name in sorted(pinned):
        print(f"{name}=={pinned[name]}")


if __name__ == "__main__":
    main()
