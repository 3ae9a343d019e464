#!/usr/bin/env bash
# Regenerates the Go code beside every .proto under api/ and slotkv/kvpb. Run through
# `make proto`, which installs the pinned generators into bin/tools first.
# Output depends only on the .proto files and the tool versions, so running
# it twice leaves the tree unchanged.
set -euo pipefail
cd "$(dirname "$0")/.."
tools="${TOOLS:-$PWD/bin/tools}"
export PATH="$tools:$PATH"

for tool in protoc protoc-gen-go protoc-gen-go-grpc; do
	command -v "$tool" >/dev/null || { echo "proto.sh: $tool not found; run 'make tools'" >&2; exit 1; }
done

# protoc -I must name the root that the imports ("slotdv1/map.proto") are relative to.
mapfile -t protos < <(cd api && find . -name '*.proto' -printf '%P\n' | LC_ALL=C sort)
(cd api && protoc -I . \
	--go_out=. --go_opt=paths=source_relative \
	--go-grpc_out=. --go-grpc_opt=paths=source_relative \
	"${protos[@]}")

# slotkv's own KV API. Generated from the repository root so the registered
# file name is "slotkv/kvpb/kv.proto": a bare "kv.proto" collides with etcd's
# mvccpb in any binary that links both.
protoc -I . \
	--go_out=. --go_opt=paths=source_relative \
	--go-grpc_out=. --go-grpc_opt=paths=source_relative \
	slotkv/kvpb/kv.proto
