// What every gateway route handler works with: the forwarder to the gRPC
// server, the registry of calls in flight, and the limits.
#ifndef TESSERA_SERVICES_GATEWAY_GATEWAY_CONTEXT_H_
#define TESSERA_SERVICES_GATEWAY_GATEWAY_CONTEXT_H_

#include <cstddef>

#include "services/gateway/active_calls.h"
#include "services/gateway/rpc_forwarder.h"

namespace tessera::gateway {

struct GatewayContext {
  const RpcForwarder& forwarder;
  ActiveCalls& active;
  size_t max_json_bytes;  // request bodies of JSON calls (the server's largest message)
};

}  // namespace tessera::gateway

#endif  // TESSERA_SERVICES_GATEWAY_GATEWAY_CONTEXT_H_
