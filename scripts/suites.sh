# suites.sh — reads Tests/suites, the one table of the test suites (sourced by
# scripts/run-suites.sh and scripts/run-suite.sh; the columns are explained in the table itself).
#
#   suites_load                  fills SUITE_NAMES (in table order) and, by name, SUITE_PROVIDERS
#                                (`-` for a row that starts what it needs), SUITE_API,
#                                SUITE_LIMIT, SUITE_EXPECT, SUITE_GROUP, SUITE_CMD; status 1 and
#                                a message on a malformed row
#   suite_expect NAME PROVIDER   the row's expected seconds on that provider
#   suite_command NAME PROVIDER  runs the row once (on PROVIDER, or as it is for `-`) under its
#                                hard limit; the command's status (124/137 on the limit)
#   suite_slug TEXT              TEXT as a file name

suites_table=${SUITES_TABLE:-Tests/suites}
SUITE_NAMES=()
declare -A SUITE_ROW=() SUITE_PROVIDERS=() SUITE_API=() SUITE_LIMIT=() SUITE_EXPECT=() SUITE_GROUP=() SUITE_CMD=()

suites_load() {
    local line n=0 name providers api limit expect group cmd
    while IFS= read -r line || [[ -n $line ]]; do
        n=$((n + 1))
        [[ $line =~ ^[[:space:]]*(#|$) ]] && continue
        read -r name providers api limit expect group cmd <<<"$line"
        if [[ -z $cmd || ! $limit =~ ^[0-9]+$ || ! $api =~ ^(api|-)$ || ! $expect =~ ^[0-9]+(,[a-z-]+=[0-9]+)*$ ]]; then
            echo "suites.sh: $suites_table:$n: not name providers api limit expect group command: $line" >&2
            return 1
        fi
        [[ -z ${SUITE_ROW[$name]:-} ]] || { echo "suites.sh: $suites_table:$n: '$name' twice" >&2; return 1; }
        SUITE_NAMES+=("$name")
        SUITE_ROW[$name]=$n SUITE_PROVIDERS[$name]=$providers SUITE_API[$name]=$api SUITE_LIMIT[$name]=$limit
        SUITE_EXPECT[$name]=$expect SUITE_GROUP[$name]=$group SUITE_CMD[$name]=$cmd
    done <"$suites_table"
}

suite_expect() {
    local entry seconds=${SUITE_EXPECT[$1]%%,*}
    for entry in ${SUITE_EXPECT[$1]//,/ }; do
        [[ $entry == "$2="* ]] && seconds=${entry#*=}
    done
    printf '%s\n' "$seconds"
}

suite_slug() {
    local s=${1//[^A-Za-z0-9-]/_}
    s=${s//__/_}
    printf '%s\n' "${s%_}"
}

suite_command() {
    local name=$1 provider=$2 words
    read -r -a words <<<"${SUITE_CMD[$name]//\{provider\}/${provider:-host}}"
    if [[ -z $provider || $provider == - ]]; then
        timeout --kill-after=15 "${SUITE_LIMIT[$name]}" "${words[@]}"
    else
        local api=()
        [[ ${SUITE_API[$name]} == api ]] || api=(--no-portal-api)
        scripts/test-matrix.sh --providers "$provider" --timeout "${SUITE_LIMIT[$name]}" \
            --log-dir "build/matrix/$name" "${api[@]}" -- "${words[@]}"
    fi
}
