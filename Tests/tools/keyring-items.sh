# Tests/tools/keyring-items.sh — sourced by the shell suites (Tests/cli/run.sh,
# Tests/providers/run.sh): plant, count and delete keyring items the way a test does it from
# outside the library, on whatever the suite runs over. Needs $provider and $kctl set.
#
# On the Secret Service providers that is keyringctl (Tests/tools/keyringctl.c). In a Flatpak
# sandbox (provider flatpak: Tests/flatpak/cli.sh and Tests/flatpak/providers.sh run the suites
# inside one) it is libsecret's secret-tool, whose file backend reads and writes the same
# portal-keyed file keyring; a run of it that hangs is tried again (libsecret 0.20.5 now and then
# waits forever for a portal answer it subscribed to too late: issue 26); a run takes 0.1 s.
#
#   kstore SCHEMA K=V...   (the secret on stdin)
#   kcount SCHEMA K=V...   prints the number of items whose attributes include these
#   kdelete SCHEMA K=V...  deletes every such item
hung_retry() { local i rc; for i in 1 2 3; do timeout 4 "$@"; rc=$?; ((rc == 124)) || return $rc; done; return 124; }
# Turns K=V... into secret-tool's "xdg:schema SCHEMA K V..." in $kargs.
secret_tool_args() {
    local kv
    kargs=(xdg:schema "$1")
    shift
    for kv in "$@"; do kargs+=("${kv%%=*}" "${kv#*=}"); done
}
kstore() {
    if [[ $provider == flatpak ]]; then
        local secret kargs
        secret=$(cat; printf x) && secret=${secret%x}
        secret_tool_args "$@"
        hung_retry sh -c 'secret=$1; shift; printf "%s" "$secret" | secret-tool store --label=test-item "$@"' sh "$secret" "${kargs[@]}"
    else
        timeout 30 "$kctl" store --schema "$@"
    fi
}
kcount() {
    if [[ $provider == flatpak ]]; then
        local kargs
        secret_tool_args "$@"
        local found rc
        found=$(hung_retry secret-tool search --all "${kargs[@]}" 2>/dev/null); rc=$?
        ((rc != 124)) || return 124
        grep -c '^\[' <<<"$found" || true  # (grep -c exits 1 on a count of 0)
    else
        timeout 30 "$kctl" count --schema "$@"
    fi
}
kdelete() {
    if [[ $provider == flatpak ]]; then
        local kargs
        secret_tool_args "$@"
        hung_retry secret-tool clear "${kargs[@]}"
    else
        timeout 30 "$kctl" delete-all --schema "$@"
    fi
}
