/* Fuzz target: every message decoder without a payload (the first input byte
 * picks the message type), Federation and grpc.health.v1 alike. */
#include <stdint.h>
#include <stdlib.h>

#include "common/net/codec.h"
#include "health.pb.h"

typedef union any_msg {
    fedkern_v1_JoinRequest join_req;
    fedkern_v1_JoinResponse join_resp;
    fedkern_v1_PullTaskRequest pull_req;
    fedkern_v1_PushUpdateResponse push_resp;
    fedkern_v1_HeartbeatRequest hb_req;
    fedkern_v1_HeartbeatResponse hb_resp;
    fedkern_v1_LeaveRequest leave_req;
    fedkern_v1_LeaveResponse leave_resp;
    fedkern_v1_SubmitJobRequest submit_req;
    fedkern_v1_SubmitJobResponse submit_resp;
    fedkern_v1_JobStatusRequest status_req;
    fedkern_v1_JobStatusResponse status_resp;
    fedkern_v1_JobResultRequest result_req;
    fedkern_v1_CancelJobRequest cancel_req;
    fedkern_v1_CancelJobResponse cancel_resp;
    fedkern_v1_DeleteJobRequest delete_req;
    fedkern_v1_DeleteJobResponse delete_resp;
    fedkern_v1_ClientReport report;
    fedkern_v1_ListJobsRequest list_req;
    fedkern_v1_ListJobsResponse list_resp;
    grpc_health_v1_HealthCheckRequest health_req;
    grpc_health_v1_HealthCheckResponse health_resp;
} any_msg;

static const pb_msgdesc_t *const types[] = {
    fedkern_v1_JoinRequest_fields,        fedkern_v1_JoinResponse_fields,
    fedkern_v1_PullTaskRequest_fields,    fedkern_v1_PushUpdateResponse_fields,
    fedkern_v1_HeartbeatRequest_fields,   fedkern_v1_HeartbeatResponse_fields,
    fedkern_v1_LeaveRequest_fields,       fedkern_v1_LeaveResponse_fields,
    fedkern_v1_SubmitJobRequest_fields,   fedkern_v1_SubmitJobResponse_fields,
    fedkern_v1_JobStatusRequest_fields,   fedkern_v1_JobStatusResponse_fields,
    fedkern_v1_JobResultRequest_fields,   fedkern_v1_CancelJobRequest_fields,
    fedkern_v1_CancelJobResponse_fields,  fedkern_v1_ClientReport_fields,
    fedkern_v1_ListJobsRequest_fields,    fedkern_v1_ListJobsResponse_fields,
    grpc_health_v1_HealthCheckRequest_fields, grpc_health_v1_HealthCheckResponse_fields,
    fedkern_v1_DeleteJobRequest_fields,   fedkern_v1_DeleteJobResponse_fields,
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    const pb_msgdesc_t *fields = types[data[0] % (sizeof types / sizeof *types)];
    any_msg msg = {0}; /* no callbacks in these messages; pointers start NULL */
    fk_err err;
    if (fk_codec_decode(fields, &msg, data + 1, size - 1, &err) == FK_OK) {
        uint8_t *buf;
        size_t len;
        if (fk_codec_encode(fields, &msg, 1, &buf, &len, &err) != FK_OK)
            abort();
        free(buf);
        fk_codec_release(fields, &msg);
    }
    return 0;
}
