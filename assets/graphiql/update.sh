#!/usr/bin/env bash
# Refreshes the GraphiQL page's assets from the npm registry: downloads the tarballs listed in
# packages.txt, checks each against its pinned integrity, and copies the standalone builds and
# licence files here, unchanged (so running it again must leave `git diff` empty). The server
# embeds these files when it is compiled; building it needs no Node.
set -euo pipefail
cd "$(dirname "$0")"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# package -> its files to serve, as "path-in-package:name-here"
declare -A files=(
  [graphiql]="graphiql.min.js:graphiql.min.js graphiql.min.css:graphiql.min.css"
  [react]="umd/react.production.min.js:react.production.min.js"
  [react-dom]="umd/react-dom.production.min.js:react-dom.production.min.js"
)

grep -v '^#' packages.txt | while read -r name version integrity; do
  npm pack "$name@$version" --pack-destination "$tmp" --json --silent >"$tmp/$name.json"
  got=$(node -e 'console.log(require(process.argv[1])[0].integrity)' "$tmp/$name.json")
  if [ "$got" != "$integrity" ]; then
    echo "$name@$version: the registry's tarball has integrity $got, packages.txt pins $integrity" >&2
    exit 1
  fi
  mkdir "$tmp/$name"
  tar -xzf "$tmp/$name-$version.tgz" -C "$tmp/$name" --strip-components=1
  for pair in ${files[$name]}; do
    cp "$tmp/$name/${pair%%:*}" "${pair#*:}"
  done
  cp "$tmp/$name/LICENSE" "LICENSE.$name"
  echo "$name@$version"
done
