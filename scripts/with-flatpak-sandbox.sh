#!/usr/bin/env bash
# with-flatpak-sandbox.sh — run a command inside a throwaway emulation of a
# Flatpak sandbox whose only way to the keyring is the Secret portal.
#
#   scripts/with-flatpak-sandbox.sh [--app-id ID] [--talk-name NAME]... [--host] CMD [ARGS...]
#
# What `flatpak run` sets up for an app without --talk-name=org.freedesktop.secrets,
# headless (there is no offline Flatpak runtime; docs/providers.md, "Flatpak"):
#   host side  a temporary directory (HOME, XDG_* dirs, XDG_RUNTIME_DIR mode
#              700); a private dbus-daemon whose only service directory holds
#              this script's own .service files (xdg-permission-store is the
#              one activatable service); gnome-keyring-daemon --foreground
#              --unlock --components=secrets with a random password on stdin
#              (it creates the login collection, where it keeps each app's
#              master secret, and serves org.freedesktop.impl.portal.Secret);
#              /usr/libexec/xdg-desktop-portal with XDG_DESKTOP_PORTAL_DIR
#              holding only gnome-keyring.portal. Ready when the portal's
#              org.freedesktop.portal.Secret `version` is 1.
#   the proxy  xdg-dbus-proxy with Flatpak's filter (--filter
#              --call=org.freedesktop.portal.*=* and
#              --broadcast=org.freedesktop.portal.*=@/org/freedesktop/portal/*),
#              itself in a bwrap with the app's /.flatpak-info: the portal
#              tells apps apart by the root of the process that connected,
#              which is the proxy's.
#   the app    a bwrap whose root holds /usr, /etc, /opt, /var, /srv, /work and
#              this repository (read-only), the host HOME (read-write), the app's
#              /.flatpak-info ("[Application] name=ID"), a private /tmp and
#              /run/user/UID with the proxy's socket as its bus and app/ID the
#              directory all instances share (a symlink into /run/flatpak/app,
#              as flatpak run makes it). Environment as
#              Flatpak sets it: XDG_DATA_HOME=$HOME/.var/app/ID/data (and
#              config, cache, state), XDG_RUNTIME_DIR=/run/user/UID,
#              DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/UID/bus, FLATPAK_ID.
#              The host's private bus socket is not visible in it.
#
# --talk-name NAME lets the app talk to NAME too, as the manifest's
# --talk-name=NAME does (the proxy's --talk=NAME): with org.freedesktop.secrets
# the app reaches the host's Secret Service, as an app that had the talk-name
# in an earlier release (Tests/flatpak/migration.sh).
#
# CMD runs inside the sandbox. With --host it runs on the host side instead
# (the private bus, where the keyring can be locked or the portal stopped),
# and $PORTAL_TEST_IN_SANDBOX is a command that runs its arguments inside a
# new sandbox instance of the same app (stdin, stdout, stderr and the exit
# status passed through): Tests/flatpak/run.sh works that way.
#
# Exits with CMD's status; 125 if the environment could not be set up (the
# daemons' logs printed). Everything is torn down at exit, also on Ctrl-C,
# SIGTERM and SIGHUP, as scripts/with-keyring.sh does it. The developer's own
# bus and keyring are never touched.
#
# Exported to a --host CMD (the keyring's variables are those of
# scripts/with-keyring.sh, so keyringctl works on the host side):
#   PORTAL_TEST_IN_SANDBOX        the command that runs its arguments in the sandbox
#   PORTAL_TEST_APP_ID            the app id
#   PORTAL_TEST_APP_DATA          the app's XDG_DATA_HOME (the same path inside and out)
#   PORTAL_TEST_PORTAL_PID        xdg-desktop-portal's pid
#   PORTAL_TEST_PROXY_PID         the bwrap that runs xdg-dbus-proxy
#   DBUS_SESSION_BUS_ADDRESS PORTAL_TEST_KEYRING_DIR PORTAL_TEST_KEYRING_PID
#   PORTAL_TEST_KEYRING_PASSWORD PORTAL_TEST_DBUS_PID PORTAL_TEST_PROVIDER
#   HOME XDG_RUNTIME_DIR XDG_DATA_HOME XDG_CONFIG_HOME XDG_CACHE_HOME XDG_STATE_HOME
# Inside the sandbox: PORTAL_TEST_APP_ID, and PORTAL_TEST_SANDBOX=1.
#
# Environment:
#   PORTAL_TEST_KEYRING_START_TIMEOUT  seconds to wait for each daemon (10)
#   PORTAL_TEST_KEEP_KEYRING_DIR=1     keep the temp dir and print its path

# Functions that run from traps look like dead code to shellcheck 0.9.
# shellcheck disable=SC2317
set -euo pipefail

readonly ME="with-flatpak-sandbox"

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# The directory, the bus, running CMD and the teardown (usage, note, fail_setup too); the
# providers (scripts/keyring-providers.sh) with it.
# shellcheck source=Tests/lib/private-env.sh
source "$here/../Tests/lib/private-env.sh"
penv_what=sandbox
penv_log_lines=40

app_id=org.example.PortalKeyringTest
on_host=0
talk=()
while [[ $# -gt 0 ]]; do
    case $1 in
    --talk-name)
        [[ $# -ge 2 && $2 =~ ^[A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z_][A-Za-z0-9_-]*)+$ ]] ||
            { note "error: --talk-name needs a bus name"; exit 2; }
        talk+=("--talk=$2")
        shift
        ;;
    --app-id)
        [[ $# -ge 2 ]] || { note "error: --app-id needs an ID"; exit 2; }
        app_id=$2
        shift
        ;;
    --app-id=*) app_id=${1#--app-id=} ;;
    --host) on_host=1 ;;
    --) shift; break ;;
    -h | --help) usage help ;;
    *) break ;;
    esac
    shift
done
[[ $# -gt 0 ]] || usage
# An application id as Flatpak accepts it (three or more elements).
if ! [[ $app_id =~ ^[A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z_][A-Za-z0-9_-]*){2,}$ ]]; then
    note "error: '$app_id' is not an application id (e.g. org.example.App)"
    exit 2
fi

portal_bin=/usr/libexec/xdg-desktop-portal
store_bin=/usr/libexec/xdg-permission-store
portal_file=/usr/share/xdg-desktop-portal/portals/gnome-keyring.portal
for tool in dbus-daemon gdbus gnome-keyring-daemon bwrap xdg-dbus-proxy mktemp od "$portal_bin" "$store_bin"; do
    command -v "$tool" >/dev/null 2>&1 || {
        note "error: '$tool' not found (Debian: bubblewrap xdg-dbus-proxy xdg-desktop-portal gnome-keyring; scripts/deps.sh)"
        exit "$SETUP_FAILED"
    }
done
[[ -r $portal_file ]] || { note "error: $portal_file missing (gnome-keyring ships it)"; exit "$SETUP_FAILED"; }

start_timeout=${PORTAL_TEST_KEYRING_START_TIMEOUT:-10}
if ! [[ $start_timeout =~ ^[0-9]+$ ]] || ((start_timeout < 1)); then
    note "error: PORTAL_TEST_KEYRING_START_TIMEOUT must be a positive integer"
    exit "$SETUP_FAILED"
fi

# ------------------------------------------------------------------ helpers

setup_logs() {
    local f
    for f in "$dir"/log/*; do [[ -e $f ]] && printf '%s\n' "$f"; done
    return 0
}

keyring_pid=""
portal_pid=""
proxy_pid=""

stop_daemons() {
    stop_pid "$proxy_pid"
    stop_pid "$portal_pid"
    stop_pid "$keyring_pid"
}

penv_traps

# Waits until `CHECK...` succeeds, the daemon PID alive, at most start_timeout s.
wait_for() { # PID WHAT CHECK...
    local pid=$1 what=$2 deadline=$((SECONDS + start_timeout))
    shift 2
    until "$@"; do
        alive "$pid" || fail_setup "$what exited during start-up"
        ((SECONDS <= deadline)) || fail_setup "$what was not ready within ${start_timeout}s"
        sleep 0.05
    done
}

# ------------------------------------------------------------ environment

penv_make_dir portal-sandbox services portals app-run
unset SECRET_BACKEND
export PORTAL_TEST_PROVIDER=gnome-keyring
export PORTAL_TEST_KEYRING_MODE=unlocked
export PORTAL_TEST_APP_ID="$app_id"
export PORTAL_TEST_APP_DATA="$HOME/.var/app/$app_id/data"

# The app's identity, as Flatpak writes it: the portal reads it from the root of
# the connecting process (/proc/PID/root/.flatpak-info).
printf '[Application]\nname=%s\n' "$app_id" >"$dir/flatpak-info"
cp "$portal_file" "$dir/portals/"
cat >"$dir/services/org.freedesktop.impl.portal.PermissionStore.service" <<EOF
[D-BUS Service]
Name=org.freedesktop.impl.portal.PermissionStore
Exec=$store_bin
EOF

# ------------------------------------------------------------ dbus-daemon

penv_start_bus "generated by scripts/with-flatpak-sandbox.sh: private test bus; the only
     service directory is this run's own (xdg-permission-store)" \
    "<servicedir>$(xml_escape "$dir/services")</servicedir>"

# ------------------------------------------- gnome-keyring and the portal

# A password creates the login collection, where gnome-keyring keeps the apps'
# master secrets (an empty one creates none, and RetrieveSecret fails).
PORTAL_TEST_KEYRING_PASSWORD=$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')
export PORTAL_TEST_KEYRING_PASSWORD
kp_start gnome-keyring 1 "$start_timeout" || { keyring_pid=$kp_pid; fail_setup "gnome-keyring: $kp_error"; }
keyring_pid=$kp_pid
export PORTAL_TEST_KEYRING_PID="$keyring_pid"
printf '%s\n' "$keyring_pid" >"$dir/keyring.pid"

portal_version() {
    [[ $(bus_call --dest org.freedesktop.portal.Desktop --object-path /org/freedesktop/portal/desktop \
        --method org.freedesktop.DBus.Properties.Get org.freedesktop.portal.Secret version) == "(<uint32 1>,)" ]]
}

# gnome-keyring.portal says UseIn=gnome: say the desktop is GNOME (1.16 falls back to the only
# implementation of an interface anyway; later versions choose by portals.conf).
XDG_DESKTOP_PORTAL_DIR="$dir/portals" XDG_CURRENT_DESKTOP=GNOME \
    "$portal_bin" </dev/null >>"$dir/log/xdg-desktop-portal.log" 2>&1 &
portal_pid=$!
export PORTAL_TEST_PORTAL_PID="$portal_pid"
wait_for "$portal_pid" "xdg-desktop-portal (org.freedesktop.portal.Secret version 1)" portal_version

# ------------------------------------------------------------ the sandbox

uid=$(id -u)
sandbox_run=/run/user/$uid

# The host directories an app sees, read-only (a runtime's /usr and the
# like, plus where this repository lives); merged-/usr links as on Debian.
root_args=(--tmpfs / --dev /dev --proc /proc --tmpfs /tmp --dir /run --dir "$sandbox_run" --chmod 0700 "$sandbox_run")
for d in /usr /etc /opt /var /srv /work; do
    [[ -d $d && ! -L $d ]] && root_args+=(--ro-bind "$d" "$d")
done
for l in bin sbin lib lib32 lib64 libx32; do
    [[ -L /$l ]] && root_args+=(--symlink "$(readlink "/$l")" "/$l")
done
# This repository (its built programs and tests), wherever it lives.
repo=$(cd "$here/.." && pwd)
root_args+=(--ro-bind "$repo" "$repo" --ro-bind "$dir/flatpak-info" /.flatpak-info)

# The proxy: in a sandbox with the app's identity, the host bus socket in
# and the app's runtime directory (where it listens) out.
bwrap "${root_args[@]}" --bind "$dir/bus" "$dir/bus" --bind "$dir/app-run" "$sandbox_run" \
    --die-with-parent --unshare-pid \
    xdg-dbus-proxy "$address" "$sandbox_run/bus" --filter \
    --call='org.freedesktop.portal.*=*' --broadcast='org.freedesktop.portal.*=@/org/freedesktop/portal/*' "${talk[@]}" \
    </dev/null >>"$dir/log/xdg-dbus-proxy.log" 2>&1 &
proxy_pid=$!
export PORTAL_TEST_PROXY_PID="$proxy_pid"
wait_for "$proxy_pid" "xdg-dbus-proxy" test -S "$dir/app-run/bus"

# The command that runs its arguments in a new instance of the app's sandbox,
# in this directory when the sandbox has it, else in HOME.
sandbox_cwd=$PWD
case $PWD/ in
"$repo"/* | /usr/* | /etc/* | /opt/* | /var/* | /srv/* | /work/*) ;;
*) sandbox_cwd=$HOME ;;
esac
{
    printf '#!/usr/bin/env bash\n# generated by scripts/with-flatpak-sandbox.sh: run "$@" inside the sandbox of %s\n' "$app_id"
    printf 'exec bwrap'
    printf ' %q' "${root_args[@]}" --bind "$HOME" "$HOME" --bind "$dir/app-run/bus" "$sandbox_run/bus" \
        --dir /run/flatpak/app --bind "$dir/app-shared" "/run/flatpak/app/$app_id" --symlink /run/flatpak/app "$sandbox_run/app" \
        --die-with-parent --unshare-pid --chdir "$sandbox_cwd" --clearenv \
        --setenv PATH "$PATH" --setenv HOME "$HOME" --setenv LANG C.UTF-8 \
        --setenv XDG_RUNTIME_DIR "$sandbox_run" --setenv DBUS_SESSION_BUS_ADDRESS "unix:path=$sandbox_run/bus" \
        --setenv XDG_DATA_HOME "$HOME/.var/app/$app_id/data" --setenv XDG_CONFIG_HOME "$HOME/.var/app/$app_id/config" \
        --setenv XDG_CACHE_HOME "$HOME/.var/app/$app_id/cache" --setenv XDG_STATE_HOME "$HOME/.var/app/$app_id/.local/state" \
        --setenv FLATPAK_ID "$app_id" --setenv GIO_USE_VFS local --setenv GSETTINGS_BACKEND memory \
        --setenv PORTAL_TEST_APP_ID "$app_id" --setenv PORTAL_TEST_SANDBOX 1
    printf ' "$@"\n'
} >"$dir/in-sandbox"
chmod 700 "$dir/in-sandbox"
# What flatpak run shares between the app's instances (and the host) in the otherwise per-instance
# XDG_RUNTIME_DIR: $XDG_RUNTIME_DIR/app/$FLATPAK_ID, a symlink to /run/flatpak/app bound from the
# host's $XDG_RUNTIME_DIR/app/$FLATPAK_ID (0700).
mkdir -p -m 0700 "$dir/app-shared"
mkdir -p "$HOME/.var/app/$app_id/data" "$HOME/.var/app/$app_id/config" "$HOME/.var/app/$app_id/cache"
export PORTAL_TEST_IN_SANDBOX="$dir/in-sandbox"

# Ready when the portal answers through the proxy.
in_sandbox_ready() {
    "$dir/in-sandbox" gdbus call --session --timeout 2 --dest org.freedesktop.portal.Desktop \
        --object-path /org/freedesktop/portal/desktop --method org.freedesktop.DBus.Properties.Get \
        org.freedesktop.portal.Secret version >/dev/null 2>&1
}
wait_for "$proxy_pid" "the portal through xdg-dbus-proxy" in_sandbox_ready

# ------------------------------------------------------------------- run

if ((on_host)); then
    penv_run "$@"
else
    penv_run "$dir/in-sandbox" "$@"
fi
exit "$rc"
