#!/usr/bin/env bash
# Build the collector of collector/manifest.yaml once, with the OpenTelemetry
# Collector Builder (ocb), and cache the binary by the manifest's hash:
#
#   ${XDG_CACHE_HOME:-~/.cache}/otel-stall/collector/<sha256 of manifest, 16 hex>/otelcol-stall
#
# Prints the binary's path as its last line. A second run finds it and returns at
# once. Go's own caches (GOMODCACHE, GOCACHE) stay where `go env` says, so a
# rebuild after a manifest change reuses the modules and objects already there.
#
#   collector/build.sh           build if needed, print the path
#   collector/build.sh --path    print where the binary is or would be; build nothing
#
# The builder is installed with `go install` at the release the manifest pins (its
# OTLP receiver's version), into the cache, not into GOPATH/bin. Two runs at once
# (CI's background job and a developer's `make e2e`) take a lock: the second waits
# for the first and then finds the binary. The binary is written beside its final
# name and renamed, so a half-written one is never found.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
manifest=${OTEL_STALL_COLLECTOR_MANIFEST:-$here/manifest.yaml}
name=otelcol-stall
cache_root=${XDG_CACHE_HOME:-$HOME/.cache}/otel-stall/collector
[ -r "$manifest" ] || {
    echo "collector/build.sh: no manifest at $manifest" >&2
    exit 2
}
hash=$(sha256sum "$manifest" | cut -c1-16)
dest=$cache_root/$hash
binary=$dest/$name

if [ "${1:-}" = --path ]; then
    echo "$binary"
    exit 0
fi
if [ -x "$binary" ]; then
    echo "$binary"
    exit 0
fi

command -v go >/dev/null 2>&1 || {
    echo "collector/build.sh: no 'go' on PATH; install Go (1.24 or newer) to build the collector" >&2
    exit 2
}
release=$(sed -n 's|^ *- gomod: go.opentelemetry.io/collector/receiver/otlpreceiver \(v[0-9.]*\)$|\1|p' "$manifest")
if [ -z "$release" ]; then
    echo "collector/build.sh: $manifest names no otlpreceiver version; cannot pick the builder's release" >&2
    exit 2
fi

mkdir -p "$cache_root"
exec 9>"$cache_root/.lock"
if command -v flock >/dev/null 2>&1; then
    # The deadline: a cold build takes minutes on two shared cores; 30 is plenty.
    flock -w 1800 9 || {
        echo "collector/build.sh: another build held $cache_root/.lock for 30 minutes" >&2
        exit 1
    }
fi
if [ -x "$binary" ]; then # built by the run we waited for
    echo "$binary"
    exit 0
fi

work=$(mktemp -d "$cache_root/build.XXXXXX")
trap 'rm -rf -- "$work"' EXIT
started=$SECONDS
cp "$manifest" "$work/original.yaml" # what the hash names, even if the file changes meanwhile

builder=$cache_root/builder-$release/builder
if [ ! -x "$builder" ]; then # kept across manifest changes: one per release
    echo "collector/build.sh: installing the builder $release" >&2
    GOBIN=$work/bin go install "go.opentelemetry.io/collector/cmd/builder@$release" >&2
    mkdir -p "${builder%/*}"
    mv -f "$work/bin/builder" "$builder"
fi

# The manifest with its output_path replaced by our temp folder.
sed "s|^\( *output_path:\).*|\1 $work/src|" "$manifest" >"$work/manifest.yaml"
echo "collector/build.sh: building $name ($manifest, hash $hash)" >&2
"$builder" --config="$work/manifest.yaml" >&2

mkdir -p "$dest"
cp "$work/original.yaml" "$dest/manifest.yaml"
mv "$work/src/$name" "$dest/.$name.tmp"
mv -f "$dest/.$name.tmp" "$binary"
echo "collector/build.sh: built $binary in $((SECONDS - started))s" >&2
echo "$binary"
