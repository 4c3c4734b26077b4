#!/bin/sh
# The image's recipe: build detemplate's wheel and install it with its runtime extras into a
# fresh virtualenv, with every version pinned by deploy/constraints.txt.
#
# The Dockerfile's build stage runs exactly this; CI runs it too (tests/test_image_recipe.py),
# since no Docker engine runs there: so the image's recipe is tested.
#
#   deploy/build.sh VENV [SRC]      SRC: the project folder (default: this script's parent)
#
# Environment: PYTHON (default python3), EXTRAS (default stream), REQUIRE_COMPILED (1: fail unless
# the compiled page walk loads; the Dockerfile sets it), PIP_* as pip reads them.
set -eu
VENV=${1:?usage: deploy/build.sh VENV [SRC]}
SRC=${2:-$(cd "$(dirname "$0")/.." && pwd)}
PYTHON=${PYTHON:-python3}
EXTRAS=${EXTRAS:-stream}
WHEELS=$(mktemp -d)
trap 'rm -rf "$WHEELS"' EXIT

"$PYTHON" -m venv "$VENV"
# The wheel alone (--no-deps): its dependencies come from the index, pinned below.
"$VENV/bin/pip" wheel --quiet --disable-pip-version-check --no-deps --wheel-dir "$WHEELS" "$SRC"
set -- "$WHEELS"/detemplate-*.whl
"$VENV/bin/pip" install --quiet --disable-pip-version-check \
    --constraint "$SRC/deploy/constraints.txt" "$1[$EXTRAS]"
"$VENV/bin/detemplate" --version
if [ "${REQUIRE_COMPILED:-0}" = 1 ]; then
  # The compiled walk depends on selectolax's private ABI: a build that cannot load it
  # stops here, not in production with the slow walk.
  "$VENV/bin/python" -c 'from detemplate import settings; print("page walk:", settings.use_walk(settings.WalkSettings(require_compiled=True)))'
fi
