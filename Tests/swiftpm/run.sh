#!/usr/bin/env bash
# Tests/swiftpm/run.sh — a package that depends on this one, as docs/swift.md says.
#
#   Tests/swiftpm/run.sh [WORK_DIR]          (needs swift on PATH: source scripts/deps.sh)
#
# Takes the Package.swift snippet from docs/swift.md (its first ```swift block),
# points its dependency at this checkout through a directory named portal-keyring (the identity
# the snippet's `package:` names), adds a main.swift that uses PortalAuth and the guide's code
# snippet (the second ```swift block), and builds it. Checks:
#   1. the dependent builds and runs (no keyring needed: it only checks arguments);
#   2. the build prints no "warning:" — in particular not "prohibited flag(s): -pthread", which
#      libsecret-1.pc's private dependencies used to bring (Package.swift, CGLib).
# Exits 1 if a check failed. Slow: it builds the package again in WORK_DIR (default a temp dir).
set -uo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
work=${1:-$(mktemp -d /tmp/portal-swiftpm.XXXXXX)}
mkdir -p "$work"
# shellcheck source=Tests/lib/harness.sh
source "$repo/Tests/lib/harness.sh"

# The guide's snippet, with the URL dependency swapped for the path one it mentions.
snippet=$(awk '/^```swift$/ {grab=1; next} grab && /^```$/ {exit} grab {print}' "$repo/docs/swift.md")
grep -q '.product(name: "PortalKeyring", package: "portal-keyring")' <<<"$snippet" || { bad "docs/swift.md has no PortalKeyring product snippet"; exit 1; }
ln -sfn "$repo" "$work/portal-keyring"
mkdir -p "$work/app/Sources/MyApp"
sed -e 's|^\( *\)\.package(url: .*|\1.package(path: "../portal-keyring"),|' -e '/or a local checkout/d' <<<"$snippet" >"$work/app/Package.swift"
grep -q 'package(path: "../portal-keyring")' "$work/app/Package.swift" || bad "could not point the snippet at the checkout"
cat >"$work/app/Sources/MyApp/main.swift" <<'SWIFT'
import PortalKeyring

// Argument checks only: no keyring, no network.
do {
    _ = try PortalAuth(authEnvironmentId: "env", redirectUrl: "not a url")
    print("accepted")
} catch {
    print(error)
}
let auth = try PortalAuth(authEnvironmentId: "env", redirectUrl: "myapp://auth")
print(auth.apiHost)
SWIFT

# The guide's code snippet (the second ```swift block of docs/swift.md) must compile as is,
# given the one function it leaves to the app.
awk '/^```swift$/ {n++; if (n == 2) {grab=1; next}} grab && /^```$/ {exit} grab {print}' \
    "$repo/docs/swift.md" >"$work/app/Sources/MyApp/ReadmeSnippet.swift"
grep -q "PortalAuth(" "$work/app/Sources/MyApp/ReadmeSnippet.swift" || bad "docs/swift.md's Swift code snippet not found"
printf '\n@MainActor func showSignIn() {}\n' >>"$work/app/Sources/MyApp/ReadmeSnippet.swift"

log="$work/build.log"
if (cd "$work/app" && swift build >"$log" 2>&1); then ok "docs/swift.md's Package.swift and code snippet build a dependent package"; else cat "$log"; bad "the dependent package does not build"; fi
if grep -i "warning:" "$log"; then bad "the dependent's build printed warnings (above)"; else ok "no warning in the dependent's build (no -pthread)"; fi
out=$(cd "$work/app" && "$(swift build --show-bin-path 2>/dev/null)/MyApp" 2>&1)
expected=$'invalid argument: redirectUrl\napi.portalhq.io'
[[ $out == "$expected" ]] && ok "it runs: a bad redirect URL is refused, the default host is used" || bad "MyApp printed: $out"
harness_summary swiftpm/run.sh
