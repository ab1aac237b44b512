#!/usr/bin/env bash
# Regenerates the Go code for every .proto file in this directory.
# Run through `go generate ./messages` from the module root.
set -euo pipefail
cd "$(dirname "$0")"
if ! command -v protoc >/dev/null 2>&1; then
  echo "generate.sh: protoc not found; installing Debian protobuf-compiler" >&2
  if [ "$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq protobuf-compiler >/dev/null
fi
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
# protoc-gen-go is pinned in go.mod (tool directive); build that exact version.
go build -o "$bin/protoc-gen-go" google.golang.org/protobuf/cmd/protoc-gen-go
shopt -s nullglob
protos=(*.proto)
if [ ${#protos[@]} -eq 0 ]; then
  echo "generate.sh: no .proto files" >&2
  exit 0
fi
PATH="$bin:$PATH" protoc --proto_path=. --go_out=. --go_opt=paths=source_relative "${protos[@]}"
