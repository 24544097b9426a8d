#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# build-pkg.sh VERSION OUTDIR: macake's installer package for macOS,
# OUTDIR/macake-VERSION.pkg, built with pkgbuild (so on a Mac) from what
# `make build man completions` wrote to bin/:
#
#   /usr/local/bin/macake                        the binary (root's, as the LaunchDaemon needs)
#   /usr/local/share/man/man1/macake.1           the manual page
#   /usr/local/share/{bash-completion/completions,zsh/site-functions,fish/vendor_completions.d}
#   /usr/local/share/macake/examples/            the example policies and launchd plists
#
# Installing it starts nothing; its postinstall restarts a macake watch
# that runs already (an upgrade). Signed when MACAKE_PKG_SIGN_IDENTITY
# names a "Developer ID Installer" identity (in MACAKE_PKG_KEYCHAIN when
# set), unsigned otherwise.
set -eu

version=$1 out=$2
here=$(cd "$(dirname "$0")" && pwd)
for f in bin/macake bin/man/macake.1 bin/completions/macake.bash bin/completions/_macake bin/completions/macake.fish; do
	[ -f "$f" ] || { echo "build-pkg.sh: $f is missing: run 'make build man completions' first" >&2; exit 1; }
done
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
p=$root/usr/local
install -d "$p/bin" "$p/share/man/man1" "$p/share/bash-completion/completions" "$p/share/zsh/site-functions" \
	"$p/share/fish/vendor_completions.d" "$p/share/macake/examples/links.d" "$p/share/macake/examples/launchd"
install -m 0755 bin/macake "$p/bin/macake"
install -m 0644 bin/man/macake.1 "$p/share/man/man1/macake.1"
install -m 0644 bin/completions/macake.bash "$p/share/bash-completion/completions/macake"
install -m 0644 bin/completions/_macake "$p/share/zsh/site-functions/_macake"
install -m 0644 bin/completions/macake.fish "$p/share/fish/vendor_completions.d/macake.fish"
install -m 0644 examples/links.d/*.toml "$p/share/macake/examples/links.d/"
install -m 0644 examples/launchd/*.plist "$p/share/macake/examples/launchd/"

set -- --root "$root" --identifier org.macake.macake --version "${version#v}" --install-location / \
	--ownership recommended --scripts "$here/scripts"
if [ -n "${MACAKE_PKG_SIGN_IDENTITY:-}" ]; then
	set -- "$@" --sign "$MACAKE_PKG_SIGN_IDENTITY" --timestamp
	if [ -n "${MACAKE_PKG_KEYCHAIN:-}" ]; then
		set -- "$@" --keychain "$MACAKE_PKG_KEYCHAIN"
	fi
else
	echo "build-pkg.sh: MACAKE_PKG_SIGN_IDENTITY is not set: the package is unsigned" >&2
fi
mkdir -p "$out"
pkgbuild "$@" "$out/macake-${version#v}.pkg"
echo "$out/macake-${version#v}.pkg"
