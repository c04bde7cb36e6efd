# Sourced by the bash scripts that run launchers under a time limit:
#
#   bounded SECONDS COMMAND...    # COMMAND under `timeout -k 5 SECONDS`; its exit status
#
# `timeout` makes COMMAND (a launcher and its ranks) a process group of its own, so that the
# limit stops them together. But that group gets no Ctrl-C from the terminal, bash runs a trap
# only once its foreground command has ended, and the group outlives a script that is killed.
# So COMMAND runs in the background while the script waits for it; SIGINT, SIGTERM and SIGHUP
# stop it (`timeout` passes the signal to its group, and SIGKILL 5 s later) and end the script
# with 130, 143 or 129 (its EXIT trap runs); and `setpriv --pdeathsig` has `timeout` sent
# SIGTERM when the script dies of a signal it cannot trap (SIGKILL). COMMAND reads nothing
# (a background command's input is /dev/null).

bounded_pid=
# The script's stderr, for the message of a stop that comes while a run's output is redirected.
exec {bounded_stderr}>&2
bounded() {
  local limit=$1 rc=0 guard=()
  shift
  if command -v setpriv >/dev/null 2>&1; then
    guard=(setpriv --pdeathsig TERM)
  fi
  "${guard[@]}" timeout -k 5 "$limit" "$@" &
  bounded_pid=$!
  wait "$bounded_pid" || rc=$?
  bounded_pid=
  return "$rc"
}

bounded_stop() {
  trap '' INT TERM HUP
  if [ -n "$bounded_pid" ]; then
    kill -TERM "$bounded_pid" 2>/dev/null || true
    wait "$bounded_pid" 2>/dev/null || true
  fi
  echo "$(basename "$0"): stopped by $1, with what it had started" >&"$bounded_stderr"
  exit "$2"
}

trap 'bounded_stop SIGINT 130' INT
trap 'bounded_stop SIGTERM 143' TERM
trap 'bounded_stop SIGHUP 129' HUP
