"""The generated protobuf messages and gRPC stubs of the Tessera API.

    from tessera_client import pb
    pb.registration_pb2.RegistrationOptions(stages=["rigid"])

The modules are generated from protos/tessera/v1/*.proto when the wheel is
built (never committed); importing them all registers every message type, so
a job result's google.protobuf.Any can be unpacked by its type name.
"""

from ._proto.tessera.v1 import access_pb2  # noqa: F401  (registers the required_role option)
from ._proto.tessera.v1 import common_pb2
from ._proto.tessera.v1 import fingerprint_pb2, fingerprint_pb2_grpc
from ._proto.tessera.v1 import http_pb2  # noqa: F401  (registers the http route option)
from ._proto.tessera.v1 import jobs_pb2
from ._proto.tessera.v1 import operator_pb2, operator_pb2_grpc
from ._proto.tessera.v1 import reconstruction_pb2, reconstruction_pb2_grpc
from ._proto.tessera.v1 import registration_pb2, registration_pb2_grpc
from ._proto.tessera.v1 import rendezvous_pb2  # noqa: F401
from ._proto.tessera.v1 import scheduler_pb2, scheduler_pb2_grpc
from ._proto.tessera.v1 import som_pb2, som_pb2_grpc
from ._proto.tessera.v1 import volume_pb2, volume_pb2_grpc

__all__ = [
    "common_pb2", "fingerprint_pb2", "fingerprint_pb2_grpc", "jobs_pb2", "operator_pb2", "operator_pb2_grpc",
    "reconstruction_pb2", "reconstruction_pb2_grpc", "registration_pb2", "registration_pb2_grpc",
    "scheduler_pb2", "scheduler_pb2_grpc", "som_pb2", "som_pb2_grpc", "volume_pb2", "volume_pb2_grpc",
]
