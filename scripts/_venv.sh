# Sourced (never run) by scripts/install-phoenix.sh and scripts/install-mlflow.sh: one
# package, at a pinned version, in its own virtual environment apart from .venv.
#
#   venv_install SCRIPT PACKAGE VERSION VENV COMMAND NOTE
#
# Does nothing when VENV/bin/COMMAND exists and PACKAGE's installed version is VERSION;
# otherwise creates VENV (with $PYTHON, default python3) if it has no python, says
# NOTE while installing PACKAGE==VERSION, and checks the version and COMMAND after.
# Prints the path of VENV/bin/COMMAND on its last line; on failure one line naming
# SCRIPT on stderr and exit 1.

# The version of PACKAGE installed in VENV, or nothing.
#   venv_installed_version VENV PACKAGE
venv_installed_version() {
  "$1/bin/python" - "$2" <<'PY' 2>/dev/null || true
import sys
from importlib.metadata import PackageNotFoundError, version
try:
    print(version(sys.argv[1]))
except PackageNotFoundError:
    pass
PY
}

# VENV's pip, minus the warnings this machine's pip configuration prints for every
# package (find-links folders that do not exist); its exit status is pip's.
#   venv_pip VENV ARGS...
venv_pip() {
  local venv="$1"
  shift
  "$venv/bin/python" -m pip --quiet --disable-pip-version-check "$@" \
    2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
}

venv_install() {
  local script="$1" package="$2" version="$3" venv="$4" command="$5" note="$6"
  if [ -x "$venv/bin/$command" ] \
     && [ "$(venv_installed_version "$venv" "$package")" = "$version" ]; then
    echo "$package $version already installed in $venv" >&2
  else
    if [ ! -x "$venv/bin/python" ]; then
      "${PYTHON:-python3}" -m venv "$venv"
    fi
    echo "installing $package $version into $venv ($note)" >&2
    venv_pip "$venv" install --upgrade pip
    venv_pip "$venv" install "$package==$version"
    if [ "$(venv_installed_version "$venv" "$package")" != "$version" ] \
       || [ ! -x "$venv/bin/$command" ]; then
      echo "$script: $package $version did not install into $venv" >&2
      exit 1
    fi
  fi
  echo "$venv/bin/$command"
}
