#!/bin/sh
# Fetch the real-world JSON data sets the codec benchmarks use that do not
# come with a Go module of go.mod, into testdata/corpora (not committed).
# Each comes from a public package through its registry's own client.
#   emoji: npm package emojibase-data@17.0.0, en/data.json (MIT)
set -eu
cd "$(dirname "$0")/.."
mkdir -p testdata/corpora
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent emojibase-data@17.0.0 >/dev/null)
tar -xzf "$tmp"/emojibase-data-17.0.0.tgz -C "$tmp" package/en/data.json package/LICENSE
cp "$tmp"/package/en/data.json testdata/corpora/emojibase-data-en.json
cp "$tmp"/package/LICENSE testdata/corpora/emojibase-data.LICENSE
# The Go-module data sets are read from the module cache; make sure it has them.
go mod download github.com/redis/rueidis github.com/klauspost/compress
echo "testdata/corpora: $(ls testdata/corpora | tr '\n' ' ')"
