#!/usr/bin/env bash
# Fails naming every kernel or algorithm-library file that includes a gRPC,
# protobuf or service-tier header (the job kit, server, scheduler and the
# service adapters; fingerprint's algorithm folders services/fingerprint/*/
# are libraries), and every such BUILD file that depends on them (see BUILD):
# the tiers go kernels -> algorithm library -> service, never back.
set -u
files=$(find -L . -path ./tools -prune -o -type f -print | grep -E '\.(h|cc|cu|cuh)$|/BUILD$')
[ -n "$files" ] || { echo "no sources found: the data labels are wrong"; exit 1; }
count=$(echo "$files" | wc -l)
[ "$count" -ge 100 ] || { echo "only $count files found: the data labels are wrong"; exit 1; }
bad=0
while IFS= read -r f; do
  case "$f" in
    */BUILD) pattern='"@system//:(grpc|grpc\+\+|protobuf)"|"//protos:|"//services/(common|server|jobs|scheduler|parallel|registration|reconstruction|som)[:/]' ;;
    *) pattern='^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"](grpc|grpcpp|google/protobuf|services/(common|server|jobs|scheduler|parallel|registration|reconstruction|som)/|services/fingerprint/[a-z_0-9]+\.h)|^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"][^">]*\.pb\.h[">]' ;;
  esac
  if hits=$(grep -nE "$pattern" "$f"); then
    echo "$f:"; echo "$hits" | sed 's/^/  /'
    bad=1
  fi
done <<< "$files"
if [ $bad -ne 0 ]; then
  echo "kernels and algorithm libraries must not use gRPC, protobuf or the service tier: move that code to the service tier"
  exit 1
fi
echo "layering: $count files checked, none uses gRPC, protobuf or the service tier"
