#!/bin/sh
# check-version.sh — debian/changelog's version must be the header's (Include/portal_keyring.h
# PORTAL_KEYRING_VERSION_MAJOR/MINOR/PATCH, read as the Makefile reads them): the version lives
# in one place, and a release that bumps it without a changelog entry fails the package build.
set -eu
cd "$(dirname "$0")/.."
header=$(build-support/header-api.sh version Include/portal_keyring.h | awk '{ print $1 "." $2 "." $3 }')
changelog=$(dpkg-parsechangelog -S Version)
if [ "$header" != "$changelog" ]; then
    echo "debian/check-version.sh: debian/changelog says $changelog but Include/portal_keyring.h says $header:" >&2
    echo "  add a changelog entry (dch -v $header) or fix the header" >&2
    exit 1
fi
