#!/usr/bin/env bash
# Installs a released infergate: downloads infergate-VERSION-TARGET.tar.gz and SHA256SUMS,
# refuses an archive whose checksum is not the one SHA256SUMS lists, and puts `infergate` and
# `cargo-infergate` into DIR. The Action (action.yml) calls it; it runs anywhere with bash,
# curl (for http(s) URLs), sha256sum and tar.
#
#   install.sh VERSION TARGET [BASE_URL] [DIR]
#
# BASE_URL: where the archives are (default the GitHub release of VERSION); an http(s):// or
# file:// URL, or a local directory. DIR: default ./infergate-VERSION.
set -euo pipefail

if [ $# -lt 2 ]; then
    echo "usage: install.sh VERSION TARGET [BASE_URL] [DIR]" >&2
    exit 2
fi
VERSION="$1"
TARGET="$2"
BASE_URL="${3:-}"
DIR="${4:-infergate-$VERSION}"
if [ -z "$BASE_URL" ]; then
    BASE_URL="https://github.com/infergate/infergate/releases/download/$VERSION"
fi
BASE_URL="${BASE_URL%/}"
ARCHIVE="infergate-$VERSION-$TARGET.tar.gz"

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

fetch() {
    local name="$1"
    case "$BASE_URL" in
        http://* | https://* | file://*)
            curl --fail --silent --show-error --location --retry 3 -o "$WORK/$name" "$BASE_URL/$name" \
                || { echo "error: cannot download $BASE_URL/$name" >&2; exit 1; }
            ;;
        *)
            cp -- "$BASE_URL/$name" "$WORK/$name" \
                || { echo "error: cannot read $BASE_URL/$name" >&2; exit 1; }
            ;;
    esac
}

fetch SHA256SUMS
fetch "$ARCHIVE"

expected="$(awk -v f="$ARCHIVE" '{ name = $2; sub(/^\*/, "", name); if (name == f) print $1 }' "$WORK/SHA256SUMS")"
if [ -z "$expected" ]; then
    echo "error: SHA256SUMS lists no $ARCHIVE" >&2
    exit 1
fi
actual="$(sha256sum "$WORK/$ARCHIVE" | awk '{ print $1 }')"
if [ "$actual" != "$expected" ]; then
    echo "error: $ARCHIVE: SHA256 checksum mismatch: SHA256SUMS says $expected, the download is $actual; refusing to install it" >&2
    exit 1
fi

tar -xzf "$WORK/$ARCHIVE" -C "$WORK"
mkdir -p "$DIR"
for bin in infergate cargo-infergate; do
    src="$WORK/infergate-$VERSION-$TARGET/$bin"
    if [ -f "$src" ]; then
        install -m 0755 "$src" "$DIR/$bin"
    fi
done
if [ ! -x "$DIR/infergate" ]; then
    echo "error: $ARCHIVE holds no infergate-$VERSION-$TARGET/infergate" >&2
    exit 1
fi
echo "installed infergate $VERSION ($TARGET) into $DIR"
