# The bookkeeping of a harness's checks, one copy for test-support/{ha,cutover,kolla}: each
# check prints `<name>: ok   ...` or `<name>: FAIL ...`, and the harness ends with
# `<name>: N passed, M failed`, the line scripts/test sums. Source it after setting
# CHECKS_NAME.
passed=0
failed=0
# result STATUS DESCRIPTION...: counts and prints a check; returns STATUS.
result() {
    local ok=$1
    shift
    if [[ $ok == 0 ]]; then
        passed=$((passed + 1))
        echo "$CHECKS_NAME: ok   $*"
    else
        failed=$((failed + 1))
        echo "$CHECKS_NAME: FAIL $*"
    fi
    return "$ok"
}
# The closing line.
checks_summary() {
    echo "$CHECKS_NAME: $passed passed, $failed failed"
}
# checks_failed_again LOG: the failed checks of LOG (with their indented detail lines) once
# more, so that they, not a log dump, end a failed run's output.
checks_failed_again() {
    ((failed > 0)) && [[ -f $1 ]] || return 0
    echo "--- the failed checks again:" >&2
    grep -E -A 6 "^$CHECKS_NAME: FAIL" "$1" | grep -E "^$CHECKS_NAME: (FAIL|  )" >&2
}
