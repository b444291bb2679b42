#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# covers: launcher/options.c, launcher/exec_main.c, runtime/core/config_keys.c,
# runtime/core/gs_error.h, doc/gsrun.1, doc/launchers.md, README.md
# One source for each option: the settings table in the code, as `gsrun
# --help` prints it (each row its option and [GSRUN_ variable]), and the exit
# statuses gsrun itself uses (gs_error.h). Every place a user reads them must
# name each one: --help's exit-status list, `gsrun exec -h`, gsrun(1)'s
# OPTIONS, ENVIRONMENT, RANK PREFIX and EXIT STATUS, doc/launchers.md's
# options of the prefix, and the README's option table and exit statuses;
# and the README's table names no option the code lacks. gsrun(1) renders
# without a warning from groff -man -ww.
. "$(dirname "$0")/lib.sh"

"$GSRUN" --help >"$OUT.help" 2>&1
"$GSRUN" exec -h >"$OUT.exec" 2>&1
# "OPTION VARIABLE" per row of --help, in the table's order.
pairs=$(awk '/^  (-[a-zA-Z], )?--[a-z]/ { o = $1 ~ /^--/ ? $1 : $2; sub(/=.*/, "", o); sub(/,$/, "", o) }
    o != "" && match($0, /\[GSRUN_[A-Z_]*/) { print o, substr($0, RSTART + 1, RLENGTH - 1); o = "" }' "$OUT.help")
check "--help shows the settings table ($(echo "$pairs" | wc -l) options with their variables)" \
    eval '[ "$(echo "$pairs" | wc -l)" -ge 12 ]' || diag "$OUT.help"

# A section of gsrun(1), its "\-" as "-".
man_section() { sed -n "/^\.SH $1/,/^\.SH /p" "$S/doc/gsrun.1" | sed 's/\\-/-/g'; }
man_opts=$(man_section OPTIONS)
man_env=$(man_section ENVIRONMENT)
man_prefix=$(man_section "RANK PREFIX")
man_exit=$(man_section "EXIT STATUS")
readme_table=$(grep '^| `-' "$S/README.md")
prefix_md=$(sed -n '/^Options (`gsrun exec -h`)/,/^$/p' "$S/doc/launchers.md")

missing() { # missing WHERE TEXT NAMES...: the names TEXT lacks, "WHERE: name" each
    local where=$1 text=$2 n
    shift 2
    for n in "$@"; do
        grep -qF -- "$n" <<<"$text" || echo -n "$where: $n; "
    done
}
m_man="" m_readme="" m_exec=""
while read -r opt var; do
    m_man+=$(missing "gsrun(1) OPTIONS" "$man_opts" "$opt")$(missing "gsrun(1) ENVIRONMENT" "$man_env" "$var")
    row=$(grep -F -- "\`$opt" <<<"$readme_table")
    m_readme+=$(missing "README option table" "$row" "\`$opt" "\`$var")
    # The rank prefix takes every valued setting but the launcher, and -v.
    case $opt in --launcher | --dry-run) continue ;; esac
    [ "$opt" = --verbose ] && opt=-v
    m_exec+=$(missing "gsrun exec -h" "$(cat "$OUT.exec")" "$opt")$(missing "gsrun(1) RANK PREFIX" "$man_prefix" "$opt")
    m_exec+=$(missing "doc/launchers.md" "$prefix_md" "\`$opt\`")
done <<<"$pairs"
check "gsrun(1) has every option in OPTIONS and its variable in ENVIRONMENT${m_man:+: missing $m_man}" \
    [ -z "$m_man" ]
check "the README's option table has a row for every option, with its variable${m_readme:+: missing $m_readme}" \
    [ -z "$m_readme" ]
check "gsrun exec -h, gsrun(1) RANK PREFIX and doc/launchers.md name every option of the prefix${m_exec:+: missing $m_exec}" \
    [ -z "$m_exec" ]
extra=""
for o in $(grep -o '^| `--[a-z-]*' <<<"$readme_table" | sed 's/^| `//'); do
    grep -q -- "^  \(-[a-zA-Z], \)\?$o[= ]\|^  \(-[a-zA-Z], \)\?$o\$" "$OUT.help" || extra+=" $o"
done
check "the README's option table names no option the code lacks${extra:+:$extra}" [ -z "$extra" ]

# gsrun's own exit statuses, from the code.
codes=$(sed -n 's/^ *GS_EXIT_[A-Z_]* = \([0-9]*\),.*/\1/p' "$S/runtime/core/gs_error.h")
help_exit=$(sed -n '/^Exit status/,$p' "$OUT.help")
readme_exit=$(sed -n '/^Exit status:/,/^$/p' "$S/README.md")
m_exit=""
for c in $codes; do
    grep -qw "$c" <<<"$help_exit" || m_exit+=" --help: $c"
    grep -q "^\.BR\? \"\?$c\b\|^\.BR [0-9]* \", \" $c\$" <<<"$man_exit" || m_exit+=" gsrun(1): $c"
    grep -qw "$c" <<<"$readme_exit" || m_exit+=" README: $c"
done
check "every exit status of gsrun's own ($(echo $codes)) is in --help, gsrun(1) and the README${m_exit:+: missing$m_exit}" \
    eval '[ "$(echo $codes | wc -w)" -ge 7 ] && [ -z "$m_exit" ]'

if command -v groff >/dev/null 2>&1; then
    groff -man -ww -z "$S/doc/gsrun.1" >"$OUT.groff" 2>&1
    check "gsrun(1) renders without a warning (groff -man -ww)" eval '[ ! -s "$OUT.groff" ]' || diag "$OUT.groff"
else
    ok "gsrun(1) renders without a warning # SKIP no groff here"
fi
finish
