# The checks the tool's test scripts share; source it after setting `work` (a
# scratch directory) and `failures=0`.
#
# expect STATUS DESCRIPTION -- COMMAND...: runs the command, checks its exit status
# and keeps its stdout and stderr in $work/out and $work/err.
expect() {
  local want=$1 what=$2
  shift 3
  "$@" >"$work/out" 2>"$work/err"
  local got=$?
  if [[ $got -ne $want ]]; then
    echo "FAIL: $what: exit $got, expected $want: $*"
    sed 's/^/  stdout: /' "$work/out" | head -20
    sed 's/^/  stderr: /' "$work/err" | head -20
    failures=$((failures + 1))
  else
    echo "ok: $what (exit $got)"
  fi
}
# contains FILE TEXT DESCRIPTION: the last command's stdout or stderr holds TEXT.
contains() {
  if ! grep -q -- "$2" "$work/$1"; then
    echo "FAIL: $3: '$2' not in $1"
    sed "s/^/  $1: /" "$work/$1" | head -20
    failures=$((failures + 1))
  fi
}
# lacks FILE TEXT DESCRIPTION: it does not.
lacks() {
  if grep -q -- "$2" "$work/$1"; then
    echo "FAIL: $3: '$2' in $1"
    failures=$((failures + 1))
  fi
}
