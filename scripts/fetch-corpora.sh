#!/bin/sh
# Fetch the real-world JSON data sets the codec benchmarks use that do not
# come with a Go module of go.mod, into testdata/corpora (not committed).
# Each comes from a public package through its registry's own client
# (internal/harness/corpus/real.go says how each is split into values):
#   emoji: npm package emojibase-data@17.0.0, en/data.json (MIT)
#   github-webhooks: npm package @octokit/webhooks-examples@7.6.1,
#     api.github.com/index.json (MIT): nested documents, 0.9-27 KB
#   browser-compat, browser-compat-large: npm package
#     @mdn/browser-compat-data@8.1.9, data.json (CC0-1.0): deeply nested
#     feature trees, split at 10 KB
set -eu
cd "$(dirname "$0")/.."
mkdir -p testdata/corpora
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fetch() { # package@version, file in the package, name under testdata/corpora
	dir="$tmp/$(echo "$1" | tr '/@' '__')"
	mkdir -p "$dir"
	tgz=$(cd "$dir" && npm pack --silent "$1" | tail -n 1)
	tar -xzf "$dir/$tgz" -C "$dir" "package/$2" package/package.json
	tar -xzf "$dir/$tgz" -C "$dir" package/LICENSE 2>/dev/null || true
	cp "$dir/package/$2" "testdata/corpora/$3.json"
	# the license file, or (a package that ships none) its package.json naming it
	if [ -f "$dir/package/LICENSE" ]; then
		cp "$dir/package/LICENSE" "testdata/corpora/$3.LICENSE"
	else
		cp "$dir/package/package.json" "testdata/corpora/$3.package.json"
	fi
}
fetch emojibase-data@17.0.0 en/data.json emojibase-data-en
fetch @octokit/webhooks-examples@7.6.1 api.github.com/index.json octokit-webhooks-examples
fetch @mdn/browser-compat-data@8.1.9 data.json mdn-browser-compat-data
# The Go-module data sets are read from the module cache; make sure it has them.
go mod download github.com/redis/rueidis github.com/klauspost/compress
echo "testdata/corpora: $(ls testdata/corpora | tr '\n' ' ')"
