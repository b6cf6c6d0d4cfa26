#!/usr/bin/env bash
# Creates the project's Python virtual environment (.venv, or $ND_VENV) with
# the pinned PyTorch whose LibTorch is normdoctor's primary build, and prints
# nothing else on success but one line. Idempotent: an existing venv with the
# right torch is kept.
#
#   scripts/setup-venv.sh            # .venv with torch==$ND_TORCH_VERSION (default 2.13.0, CPU)
#
# The pin matters: an unpinned `pip install torch` downloads a CUDA build of
# several GB. The build machines have the 2.13.0 CPU wheel on disk; pip
# takes it from there. numpy is for the fixture scripts.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
venv="${ND_VENV:-$here/.venv}"
want="${ND_TORCH_VERSION:-2.13.0}"
py="${PYTHON:-python3}"
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import torch,sys; sys.exit(0 if torch.__version__.split('+')[0]=='$want' else 1)" 2>/dev/null; then
  echo "setup-venv: $venv has torch $want"
  exit 0
fi
if ! "$py" -c 'import venv, ensurepip' 2>/dev/null; then
  # Debian's own python3 needs python3-venv for ensurepip.
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends python3-venv
fi
"$py" -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check "torch==$want" "numpy<3" 2>&1 | grep -v "is ignored: it is neither a file nor a directory" || true
"$venv/bin/python" -c "import torch; print('setup-venv: torch', torch.__version__, 'in $venv')"
