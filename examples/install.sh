# Sourced by setup-cpu.sh and setup-quant.sh: install packages into a virtual environment
# with uv (parallel downloads and installs: about 1 minute for vLLM's CPU build and its 3.5 GB
# of dependencies from an empty cache, 20-30 s from a warm one, where pip took about 3
# minutes from a warm cache), falling back to pip when uv cannot be installed or fails.
#
# uv does not read pip's configuration, so what pip is told about local wheel folders
# (find-links) and version caps (constraint), in its config files or PIP_* variables, is
# passed on: on machines where the CPU build of torch lies in a local folder, uv installs
# that file as pip would. Set MOPT_INSTALLER=pip to use pip only.

# install_into VENV_DIR SPEC...
install_into() {
  local venv=$1
  shift
  if [ "${MOPT_INSTALLER:-uv}" != pip ] && _uv_ready "$venv"; then
    local extra=()
    local item
    for item in ${PIP_FIND_LINKS:-$("$venv/bin/python" -m pip config get global.find-links 2>/dev/null || true)}; do
      [ -e "$item" ] && extra+=(--find-links "$item")
    done
    for item in ${PIP_CONSTRAINT:-$("$venv/bin/python" -m pip config get global.constraint 2>/dev/null || true)}; do
      [ -e "$item" ] && extra+=(--constraint "$item")
    done
    # --compile-bytecode: as pip does; without it every first import (and every vLLM process
    # started with -B) compiles the sources again
    if "$venv/bin/uv" pip install --quiet --compile-bytecode --python "$venv/bin/python" \
        "${extra[@]}" "$@"; then
      return 0
    fi
    echo "== uv could not install; trying pip" >&2
  fi
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$@"
}

# uninstall_from VENV_DIR NAME...: remove packages if present (uv's or pip's way).
uninstall_from() {
  local venv=$1
  shift
  if [ -x "$venv/bin/uv" ]; then
    "$venv/bin/uv" pip uninstall --quiet --python "$venv/bin/python" "$@" 2>/dev/null || true
  else
    "$venv/bin/python" -m pip uninstall --quiet -y "$@" 2>/dev/null || true
  fi
}

_uv_ready() {
  [ -x "$1/bin/uv" ] && return 0
  "$1/bin/python" -m pip install --quiet --disable-pip-version-check 'uv>=0.9' >/dev/null 2>&1
}
