#!/usr/bin/env bash
# find_python.sh - prints the path of a python3 that can import matplotlib, or says how to get one (exit 1)
set -u

# Candidates in order: $PYTHON (when set), python3 on PATH, the distribution's own, then every
# other python3* on PATH (a pyenv or venv python3 may lack matplotlib while /usr/bin/python3 has it).
candidates() {
    [ -n "${PYTHON:-}" ] && echo "$PYTHON"
    command -v python3 2>/dev/null
    echo /usr/bin/python3
    echo /usr/local/bin/python3
    local IFS=:
    for dir in $PATH; do
        for p in "$dir"/python3 "$dir"/python3.[0-9]*; do
            [[ "${p##*/}" =~ ^python3(\.[0-9]+)?$ ]] && [ -x "$p" ] && echo "$p"
        done
    done
}

seen=" "
while read -r py; do
    [ -n "$py" ] || continue
    [ -x "$py" ] || continue
    case "$seen" in *" $py "*) continue ;; esac
    seen="$seen$py "
    if "$py" -c 'import matplotlib' >/dev/null 2>&1; then
        echo "$py"
        exit 0
    fi
done < <(candidates)

{
    echo "ringside: error: no python3 that can import matplotlib (tried:${seen% })"
    echo "  Debian/Ubuntu: make deps   (installs python3-matplotlib for /usr/bin/python3)"
    echo "  any python3:   python3 -m pip install matplotlib"
    echo "  or point PYTHON at one that has it: PYTHON=/path/to/python3"
} >&2
exit 1
