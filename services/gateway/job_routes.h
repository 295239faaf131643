// The job routes beside /rpc/ that speak plain HTTP rather than JSON messages:
//   GET /v1/jobs/{job_id}/events[?after_sequence=N]  SchedulerService.Watch as
//       Server-Sent Events (Last-Event-ID resumes after that sequence)
//   GET /v1/jobs/{job_id}/files/{name}   a result file's raw bytes, streamed from
//       SchedulerService.DownloadFile (Content-Length; Range: bytes=N- or
//       bytes=N-M answers 206 from offset N)
//   GET /v1/jobs/{job_id}/preview.png[?name=F&max_edge=N]  SchedulerService.GetPreview
#ifndef TESSERA_SERVICES_GATEWAY_JOB_ROUTES_H_
#define TESSERA_SERVICES_GATEWAY_JOB_ROUTES_H_

#include <string>

#include <httplib.h>

#include "services/gateway/gateway_context.h"

namespace tessera::gateway {

void ServeJobEvents(const GatewayContext& gateway, const std::string& job_id, const httplib::Request& request,
                    httplib::Response& response);
void ServeJobFile(const GatewayContext& gateway, const std::string& job_id, const std::string& name,
                  const httplib::Request& request, httplib::Response& response);
void ServeJobPreview(const GatewayContext& gateway, const std::string& job_id, const httplib::Request& request,
                     httplib::Response& response);

}  // namespace tessera::gateway

#endif  // TESSERA_SERVICES_GATEWAY_JOB_ROUTES_H_
