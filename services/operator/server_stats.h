// OperatorService.GetServerStats' body (issue 35), plain C++: the samples of
// a Prometheus registry (the process's, which /metrics serves) whose names
// start with "tessera_": counters and gauges as they are, histograms as
// NAME_count and NAME_sum (buckets are for /metrics), summaries likewise.
#ifndef TESSERA_SERVICES_OPERATOR_SERVER_STATS_H_
#define TESSERA_SERVICES_OPERATOR_SERVER_STATS_H_

#include <prometheus/registry.h>

#include "tessera/v1/operator.pb.h"

namespace tessera::operator_api {

v1::ServerStats CollectServerStats(const prometheus::Registry& registry);

}  // namespace tessera::operator_api

#endif  // TESSERA_SERVICES_OPERATOR_SERVER_STATS_H_
