"""Client: one connection to a Tessera server and the typed calls on it."""

import datetime
import os
import secrets
import time
from typing import Iterator, List, Optional, Sequence, Union

import grpc
from google.protobuf import any_pb2, message as pb_message, symbol_database

from . import pb
from .errors import JobFailedError, TesseraError, code_from_int, from_rpc_error
from .fingerprints import as_template, fingerprint_image
from .progress import bar
from .retry import RetryPolicy
from .trace import check_traceparent
from .uploads import PathLike, file_chunks, zipped_series

JobState = pb.common_pb2.JobState
TERMINAL_STATES = (JobState.JOB_STATE_SUCCEEDED, JobState.JOB_STATE_FAILED, JobState.JOB_STATE_CANCELLED)
_MAX_MESSAGE_BYTES = 64 << 20  # the server's default --max-message-mb


class ServerPath(str):
    """A path on the server (under its --data-root), not a local file to upload.

        client.register(ServerPath("scans/fixed.nii.gz"), "moving.nii.gz")
    """


VolumeLike = Union[PathLike, ServerPath, Sequence[PathLike], "pb.registration_pb2.VolumeSource",
                   "pb.common_pb2.UploadedFile"]


def _read_file(path: Optional[PathLike]) -> Optional[bytes]:
    if path is None:
        return None
    with open(path, "rb") as f:
        return f.read()


def _unix_ms(deadline) -> int:
    if deadline is None:
        return 0
    if isinstance(deadline, datetime.timedelta):
        return int((time.time() + deadline.total_seconds()) * 1000)
    if isinstance(deadline, datetime.datetime):
        if deadline.tzinfo is None:
            raise ValueError("deadline: a naive datetime is ambiguous; give it a tzinfo (e.g. timezone.utc)")
        return int(deadline.timestamp() * 1000)
    raise TypeError(f"deadline: expected a datetime or timedelta, got {type(deadline).__name__}")


def _new_request_id() -> str:
    """An idempotency key for a submit, so retrying it cannot queue the job twice."""
    return f"py-{secrets.token_hex(12)}"


def _safe_join(out_dir: PathLike, name: str) -> str:
    """out_dir/name for a result file name such as "warped_dicom/IM00001.dcm",
    refusing names that would leave out_dir."""
    parts = name.split("/")
    if not name or name.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"name: {name!r} is not a relative result file name")
    return os.path.join(os.fspath(out_dir), *parts)


class Client:
    """A connection to `tessera serve` (any role that hosts the services used).

        with tessera_client.Client("localhost:50051", token_file="alice.token") as c:
            job = c.register("fixed.nii.gz", "moving.nii.gz", stages=["rigid", "affine"])
            info = c.wait(job.job_id, progress=True)
            c.download(job.job_id, out_dir="results")

    Args:
      address: host:port of the server's gRPC port.
      token / token_file: a bearer token (or a file holding one) for servers
        started with --token-file; sent as `authorization: Bearer TOKEN`.
      tls_ca: the CA (PEM file) that signed the server's certificate: TLS on.
      tls_cert / tls_key: a client certificate and key (PEM files), for
        servers with --tls-client-ca (mutual TLS).
      tls_server_name: check the certificate against this name instead of the
        host in `address`.
      timeout: seconds for each unary call (streams: uploads and downloads have
        no overall deadline, watches none).
      retry: when to retry (RetryPolicy; NO_RETRY to disable).
      traceparent: a W3C traceparent sent with every call, so the server's
        logs, audit records and jobs join the caller's trace (settable later
        through the `traceparent` attribute).
    """

    def __init__(self, address: str, *, token: Optional[str] = None, token_file: Optional[PathLike] = None,
                 tls_ca: Optional[PathLike] = None, tls_cert: Optional[PathLike] = None,
                 tls_key: Optional[PathLike] = None, tls_server_name: Optional[str] = None,
                 timeout: float = 60.0, retry: RetryPolicy = RetryPolicy(), traceparent: Optional[str] = None):
        if token is not None and token_file is not None:
            raise ValueError("token, token_file: give one of them, not both")
        if token_file is not None:
            with open(token_file) as f:
                token = f.read().strip()
            if not token:
                raise ValueError(f"token_file: {os.fspath(token_file)!r} is empty")
        if (tls_cert is None) != (tls_key is None):
            raise ValueError("tls_cert, tls_key: a client certificate needs both")
        self.timeout = timeout
        self.retry = retry
        self.traceparent = check_traceparent(traceparent) if traceparent else None
        options = [("grpc.max_receive_message_length", _MAX_MESSAGE_BYTES),
                   ("grpc.max_send_message_length", _MAX_MESSAGE_BYTES)]
        if tls_server_name:
            options.append(("grpc.ssl_target_name_override", tls_server_name))
        self._token_metadata = ()
        if tls_ca is not None or tls_cert is not None:
            credentials = grpc.ssl_channel_credentials(
                root_certificates=_read_file(tls_ca), private_key=_read_file(tls_key),
                certificate_chain=_read_file(tls_cert))
            if token:
                credentials = grpc.composite_channel_credentials(
                    credentials, grpc.access_token_call_credentials(token))
            self._channel = grpc.secure_channel(address, credentials, options=options)
        else:
            # grpcio refuses call credentials on a plaintext channel, so the
            # token travels as plain metadata there (loopback and tests).
            if token:
                self._token_metadata = (("authorization", f"Bearer {token}"),)
            self._channel = grpc.insecure_channel(address, options=options)
        self.scheduler = pb.scheduler_pb2_grpc.SchedulerServiceStub(self._channel)
        self.registration = pb.registration_pb2_grpc.RegistrationServiceStub(self._channel)
        self.reconstruction = pb.reconstruction_pb2_grpc.ReconstructionServiceStub(self._channel)
        self.fingerprint = pb.fingerprint_pb2_grpc.FingerprintServiceStub(self._channel)
        self.operator = pb.operator_pb2_grpc.OperatorServiceStub(self._channel)
        self.som = pb.som_pb2_grpc.SomAtlasServiceStub(self._channel)

    # ------------------------------------------------------------ plumbing

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def metadata(self):
        """What every call sends: the token (plaintext channels) and the traceparent.
        Pass it to the raw stubs (client.scheduler, ...) for calls not wrapped here."""
        md = list(self._token_metadata)
        if self.traceparent:
            md.append(("traceparent", self.traceparent))
        return tuple(md)

    def _unary(self, method, request, *, idempotent: bool, timeout: Optional[float] = None):
        attempt = 0
        while True:
            attempt += 1
            try:
                return method(request, timeout=timeout or self.timeout, metadata=self.metadata())
            except grpc.RpcError as e:
                error = from_rpc_error(e)
            delay = self.retry.delay_s(error, attempt, idempotent)
            if delay is None:
                raise error
            time.sleep(delay)

    # ------------------------------------------------------------ uploads

    def _upload(self, method, path: PathLike, filename: str, progress: bool):
        # An upload is a new file on the server each time, so repeating it
        # after UNAVAILABLE cannot do anything twice that matters.
        attempt = 0
        total = os.path.getsize(path)
        while True:
            attempt += 1
            with bar(progress, total=total, unit="B", unit_scale=True, desc=f"upload {filename}") as b:
                try:
                    return method(file_chunks(path, filename, pb.common_pb2.FileChunk, b.update),
                                  metadata=self.metadata())
                except grpc.RpcError as e:
                    error = from_rpc_error(e)
            delay = self.retry.delay_s(error, attempt, idempotent=True)
            if delay is None:
                raise error
            time.sleep(delay)

    def upload_volume(self, source: Union[PathLike, Sequence[PathLike]], *, progress: bool = False,
                      filename: Optional[str] = None) -> "pb.common_pb2.UploadedFile":
        """Uploads an image for registration (RegistrationService.UploadFile, 1 MiB chunks).

        `source` is a NIfTI (.nii, .nii.gz), one DICOM file (.dcm), a zipped
        DICOM series (.zip), a DICOM series directory or a list of its files
        (both zipped on the fly into a temporary file). Returns the
        UploadedFile; its upload_id is a VolumeSource.file_id.
        """
        if isinstance(source, (str, os.PathLike)) and os.path.isdir(source):
            name = filename or (os.path.basename(os.path.normpath(os.fspath(source))) + ".zip")
            with zipped_series(source) as zipped:
                return self._upload(self.registration.UploadFile, zipped, name, progress)
        if not isinstance(source, (str, os.PathLike)):
            with zipped_series(source) as zipped:
                return self._upload(self.registration.UploadFile, zipped, filename or "series.zip", progress)
        if not os.path.isfile(source):
            raise FileNotFoundError(f"source: {os.fspath(source)!r} is not a file or directory")
        return self._upload(self.registration.UploadFile, source, filename or os.path.basename(source), progress)

    def upload_recon_file(self, path: PathLike, *, progress: bool = False,
                          filename: Optional[str] = None) -> "pb.common_pb2.UploadedFile":
        """Uploads a reconstruction input (geometry JSON, NIfTI sinogram, list-mode,
        BART .cfl/.hdr, HDF5) with ReconstructionService.UploadFile; its
        upload_id is a FileSource.upload_id."""
        if not os.path.isfile(path):
            raise FileNotFoundError(f"path: {os.fspath(path)!r} is not a file")
        return self._upload(self.reconstruction.UploadFile, path, filename or os.path.basename(path), progress)

    def volume_source(self, volume: VolumeLike, *, progress: bool = False) -> "pb.registration_pb2.VolumeSource":
        """A VolumeSource for `volume`: a ServerPath is named as is, an
        UploadedFile by its id, anything else is a local file (or series) to upload."""
        if isinstance(volume, pb.registration_pb2.VolumeSource):
            return volume
        if isinstance(volume, pb.common_pb2.UploadedFile):
            return pb.registration_pb2.VolumeSource(file_id=volume.upload_id)
        if isinstance(volume, ServerPath):
            return pb.registration_pb2.VolumeSource(path=str(volume))
        return pb.registration_pb2.VolumeSource(file_id=self.upload_volume(volume, progress=progress).upload_id)

    def file_source(self, source, *, progress: bool = False) -> "pb.reconstruction_pb2.FileSource":
        """A reconstruction FileSource: ServerPath, UploadedFile, or a local file to upload."""
        if isinstance(source, pb.reconstruction_pb2.FileSource):
            return source
        if isinstance(source, pb.common_pb2.UploadedFile):
            return pb.reconstruction_pb2.FileSource(upload_id=source.upload_id)
        if isinstance(source, ServerPath):
            return pb.reconstruction_pb2.FileSource(path=str(source))
        return pb.reconstruction_pb2.FileSource(upload_id=self.upload_recon_file(source, progress=progress).upload_id)

    # ------------------------------------------------------------ jobs

    def submit(self, spec: pb_message.Message, *, kind: Optional[str] = None, request_id: Optional[str] = None,
               priority: int = 0, deadline: Union[None, datetime.datetime, datetime.timedelta] = None,
               max_attempts: int = 0) -> "pb.jobs_pb2.JobInfo":
        """Queues any job (SchedulerService.Submit) and returns its JobInfo at once.

        `spec` is an engine's request message (RegisterRequest,
        ReconstructRequest, SearchRequest, CreateAtlasRequest, ...), packed
        into the JobSpec's Any; `kind` names the engine when the type does not.
        Without `request_id` one is made up, so a retry after a dropped
        connection can never queue the job twice.
        """
        if isinstance(spec, pb.jobs_pb2.JobSpec):
            job_spec = pb.jobs_pb2.JobSpec()
            job_spec.CopyFrom(spec)
            if kind:
                job_spec.kind = kind
        else:
            packed = any_pb2.Any()
            packed.Pack(spec)
            job_spec = pb.jobs_pb2.JobSpec(kind=kind or "", spec=packed)
        request = pb.scheduler_pb2.SubmitJobRequest(
            spec=job_spec, request_id=request_id or _new_request_id(), priority=priority,
            deadline_unix_ms=_unix_ms(deadline), max_attempts=max_attempts)
        return self._unary(self.scheduler.Submit, request, idempotent=True)

    def register(self, fixed: VolumeLike, moving: VolumeLike, *, fixed_labels: Optional[VolumeLike] = None,
                 moving_labels: Optional[VolumeLike] = None, fixed_mask: Optional[VolumeLike] = None,
                 moving_mask: Optional[VolumeLike] = None, output: Optional["pb.common_pb2.OutputOptions"] = None,
                 output_dir: str = "", progress: bool = False, request_id: Optional[str] = None,
                 **options) -> "pb.jobs_pb2.JobInfo":
        """Queues a registration job (`moving` onto `fixed`) and returns its JobInfo.

        Volumes are local files or series (uploaded first), ServerPath, an
        UploadedFile or a VolumeSource. `options` are RegistrationOptions
        fields, e.g. stages=["rigid", "affine"], scales=[2, 1],
        rigid_iterations=[20], metric="mse", device="cpu". It goes through
        RegistrationService.Register, which turns uploads into server files
        before the job is queued (submit() with a RegisterRequest takes server
        paths only, but also a priority and a deadline).
        """
        request = pb.registration_pb2.RegisterRequest(
            fixed=self.volume_source(fixed, progress=progress), moving=self.volume_source(moving, progress=progress),
            options=pb.registration_pb2.RegistrationOptions(**options), output_dir=output_dir,
            job_id=request_id or _new_request_id())
        for field, value in (("fixed_labels", fixed_labels), ("moving_labels", moving_labels),
                             ("fixed_mask", fixed_mask), ("moving_mask", moving_mask)):
            if value is not None:
                getattr(request, field).CopyFrom(self.volume_source(value, progress=progress))
        if output is not None:
            request.output.CopyFrom(output)
        status = self._unary(self.registration.Register, request, idempotent=True)
        return self.get(status.job_id)

    def reconstruct(self, request: "pb.reconstruction_pb2.ReconstructRequest") -> "pb.jobs_pb2.JobInfo":
        """Queues a reconstruction job (any modality, request built by the caller)
        through ReconstructionService.Reconstruct, which turns uploads into
        server files first; see reconstruct_ct for CT from local files."""
        if not request.request_id:
            copy = pb.reconstruction_pb2.ReconstructRequest()
            copy.CopyFrom(request)
            copy.request_id = _new_request_id()
            request = copy
        status = self._unary(self.reconstruction.Reconstruct, request, idempotent=True)
        return self.get(status.job_id)

    def reconstruct_ct(self, geometry, sinogram, *, method: str = "", iterations: int = 0, filter: str = "",
                       device: str = "", output_dir: str = "", progress: bool = False,
                       request_id: Optional[str] = None) -> "pb.jobs_pb2.JobInfo":
        """Queues a CT reconstruction: `geometry` (ASTRA JSON) and `sinogram`
        (NIfTI) as local files (uploaded), ServerPath or UploadedFile."""
        request = pb.reconstruction_pb2.ReconstructRequest(
            geometry=self.file_source(geometry, progress=progress),
            sinogram=self.file_source(sinogram, progress=progress),
            ct=pb.reconstruction_pb2.CtOptions(method=method, iterations=iterations, filter=filter), device=device,
            output_dir=output_dir, request_id=request_id or "")
        return self.reconstruct(request)

    def get(self, job_id: str) -> "pb.jobs_pb2.JobInfo":
        return self._unary(self.scheduler.Get, pb.common_pb2.JobRef(job_id=job_id), idempotent=True)

    def cancel(self, job_id: str) -> "pb.jobs_pb2.JobInfo":
        """Cancels a queued or running job (idempotent: a finished job stays as it is)."""
        return self._unary(self.scheduler.Cancel, pb.common_pb2.JobRef(job_id=job_id), idempotent=True)

    def delete(self, job_id: str) -> "pb.jobs_pb2.JobInfo":
        """Deletes an ended job's results (the job stays listed as a tombstone)."""
        return self._unary(self.scheduler.Delete, pb.common_pb2.JobRef(job_id=job_id), idempotent=True)

    def list_jobs(self, *, states: Sequence[int] = (), kind: str = "", owner: str = "", gallery: str = "",
                  limit: Optional[int] = None, page_size: int = 100) -> List["pb.jobs_pb2.JobInfo"]:
        """Jobs newest first, across pages (at most `limit`)."""
        jobs: List = []
        token = ""
        while limit is None or len(jobs) < limit:
            response = self._unary(self.scheduler.List, pb.scheduler_pb2.ListJobsRequest(
                states=states, kind=kind, owner=owner, gallery_filter=gallery, page_size=page_size,
                page_token=token), idempotent=True)
            jobs.extend(response.jobs)
            token = response.next_page_token
            if not token:
                break
        return jobs if limit is None else jobs[:limit]

    def list_workers(self) -> List["pb.scheduler_pb2.WorkerInfo"]:
        return list(self._unary(self.scheduler.ListWorkers, pb.scheduler_pb2.ListWorkersRequest(),
                                idempotent=True).workers)

    def watch(self, job_id: str, *, after_sequence: int = 0, progress: bool = False, max_reconnects: int = 10,
              timeout: Optional[float] = None) -> Iterator["pb.jobs_pb2.JobEvent"]:
        """The job's events after `after_sequence`, then live ones, ending with
        the terminal one (SUCCEEDED, FAILED or CANCELLED).

        A dropped connection (UNAVAILABLE, or a stream that ends before the
        job does) is reconnected with backoff, resuming after the last event
        received, so no event is lost or repeated; `max_reconnects` failures in
        a row without an event raise the last error. `progress` shows a bar.
        `timeout`: seconds for the whole watch (DEADLINE_EXCEEDED past it; the
        job goes on); None: until the job ends.
        """
        end = None if timeout is None else time.monotonic() + timeout
        last = after_sequence
        failures = 0
        with bar(progress, total=100, unit="%", desc=job_id,
                 bar_format="{l_bar}{bar}| {n:.0f}/{total:.0f}% {postfix}") as b:
            while True:
                remaining = None if end is None else max(0.0, end - time.monotonic())
                call = self.scheduler.Watch(pb.scheduler_pb2.WatchJobRequest(job_id=job_id, after_sequence=last),
                                            metadata=self.metadata(), timeout=remaining)
                error: Optional[TesseraError] = None
                try:
                    for event in call:
                        failures = 0
                        last = event.sequence
                        fraction = event.progress.fraction if event.HasField("progress") else 0.0
                        if event.state == JobState.JOB_STATE_SUCCEEDED:
                            fraction = 1.0
                        b.update(max(0.0, 100.0 * fraction - b.n))
                        b.set_postfix_str(JobState.Name(event.state).replace("JOB_STATE_", "").lower())
                        yield event
                        if event.state in TERMINAL_STATES:
                            return
                except grpc.RpcError as e:
                    error = from_rpc_error(e)
                    if error.code != grpc.StatusCode.UNAVAILABLE:
                        raise error from None
                finally:
                    call.cancel()  # the consumer may stop early: end the stream on the server
                failures += 1
                if failures > max_reconnects:
                    raise error or TesseraError(grpc.StatusCode.UNAVAILABLE,
                                                f"watch of {job_id} kept ending before the job did")
                time.sleep(self.retry.backoff_s(failures))

    def wait(self, job_id: str, *, progress: bool = False, timeout: Optional[float] = None) -> "pb.jobs_pb2.JobInfo":
        """Watches the job to its end and returns its final JobInfo; raises
        JobFailedError (with the job's error code) when it FAILED or was
        CANCELLED, TesseraError DEADLINE_EXCEEDED after `timeout` seconds."""
        for _ in self.watch(job_id, progress=progress, timeout=timeout):
            pass
        info = self.get(job_id)
        if info.state == JobState.JOB_STATE_SUCCEEDED:
            return info
        code = code_from_int(info.error_code) if info.error_code else (
            grpc.StatusCode.CANCELLED if info.state == JobState.JOB_STATE_CANCELLED else grpc.StatusCode.UNKNOWN)
        raise JobFailedError(code, info.error_message or JobState.Name(info.state), info)

    def job_result(self, job_id: str) -> "pb.jobs_pb2.JobResult":
        """The succeeded job's JobResult: the packed result and the result files."""
        return self._unary(self.scheduler.GetResult, pb.common_pb2.JobRef(job_id=job_id), idempotent=True)

    def result(self, job_id: str) -> pb_message.Message:
        """The succeeded job's typed result (RegistrationResult, ReconstructionResult, ...)."""
        packed = self.job_result(job_id).result
        try:
            cls = symbol_database.Default().GetSymbol(packed.TypeName())
        except KeyError:
            raise TesseraError(grpc.StatusCode.UNIMPLEMENTED,
                               f"result type {packed.TypeName()!r} is unknown to this client version") from None
        typed = cls()
        packed.Unpack(typed)
        return typed

    def download(self, job_id: str, name: Optional[str] = None, *, out_dir: PathLike = ".",
                 progress: bool = False) -> List[str]:
        """Downloads the job's result files (or the one named) into out_dir,
        keeping their relative names ("warped_dicom/IM00001.dcm"); returns the paths.

        Each file is written to NAME.part and renamed when complete; a .part
        left by an interrupted download (or a dropped connection now) is
        resumed from its size (DownloadFile's offset).
        """
        sizes = {f.name: f.bytes for f in self.job_result(job_id).files}
        names = [name] if name is not None else sorted(sizes)
        return [self._download_one(job_id, n, out_dir, sizes.get(n), progress) for n in names]

    def _download_one(self, job_id: str, name: str, out_dir: PathLike, expected: Optional[int],
                      progress: bool) -> str:
        target = _safe_join(out_dir, name)
        os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
        part = target + ".part"
        offset = os.path.getsize(part) if os.path.exists(part) else 0
        if expected is not None and offset > expected:
            offset = 0  # not a prefix of this file
        total = expected
        failures = 0
        with bar(progress, total=expected, initial=offset, unit="B", unit_scale=True, desc=name) as b, \
                open(part, "r+b" if offset else "wb") as out:
            out.truncate(offset)
            out.seek(offset)
            while total is None or offset < total:
                call = self.scheduler.DownloadFile(
                    pb.scheduler_pb2.DownloadJobFileRequest(job_id=job_id, name=name, offset=offset),
                    metadata=self.metadata())
                try:
                    for chunk in call:
                        if chunk.total_bytes or chunk.filename:
                            total = chunk.total_bytes
                        if chunk.offset != offset:
                            raise TesseraError(grpc.StatusCode.DATA_LOSS,
                                               f"{name}: chunk at offset {chunk.offset}, expected {offset}")
                        out.write(chunk.data)
                        offset += len(chunk.data)
                        b.update(len(chunk.data))
                        failures = 0
                    if total is None:
                        total = offset
                    if offset != total:
                        raise TesseraError(grpc.StatusCode.DATA_LOSS,
                                           f"{name}: the stream ended at byte {offset} of {total}")
                except grpc.RpcError as e:
                    error = from_rpc_error(e)
                    failures += 1
                    delay = self.retry.delay_s(error, failures, idempotent=True)
                    if delay is None:
                        raise error from None
                    out.flush()
                    time.sleep(delay)
        os.replace(part, target)
        return target

    def preview(self, job_id: str, *, name: str = "", max_edge: int = 0) -> bytes:
        """A PNG of the succeeded job's result (orthogonal mid-slices; U-matrix for SOMs)."""
        return self.preview_info(job_id, name=name, max_edge=max_edge).png

    def preview_info(self, job_id: str, *, name: str = "", max_edge: int = 0) -> "pb.scheduler_pb2.JobPreview":
        """The JobPreview (PNG, its size and what it shows)."""
        return self._unary(self.scheduler.GetPreview, pb.scheduler_pb2.JobPreviewRequest(
            job_id=job_id, name=name, max_edge=max_edge), idempotent=True)

    # ------------------------------------------------------------ fingerprints

    def enroll(self, id: str, record, *, gallery: str = "", replace: bool = False,
               metadata: Optional["pb.fingerprint_pb2.TemplateMetadata"] = None) -> "pb.fingerprint_pb2.EnrollResponse":
        """Enrolls one template or image (see fingerprint_template / fingerprint_image;
        a path or bytes is taken as described in tessera_client.fingerprints.as_template)."""
        request = pb.fingerprint_pb2.EnrollRequest(id=id, record=as_template(record), replace=replace,
                                                   gallery=gallery)
        if metadata is not None:
            request.metadata.CopyFrom(metadata)
        # With replace=False a repeat is ALREADY_EXISTS, with replace=True the same state: safe to retry.
        return self._unary(self.fingerprint.Enroll, request, idempotent=True)

    def search(self, probe, *, top_k: int = 10, matcher: str = "", gallery: str = "",
               explain: bool = False) -> "pb.fingerprint_pb2.SearchResponse":
        """1:N search of a probe template or image; candidates best first."""
        return self._unary(self.fingerprint.Search, pb.fingerprint_pb2.SearchRequest(
            probe=as_template(probe), top_k=top_k, matcher=matcher, gallery=gallery, explain=explain),
            idempotent=True)

    def verify(self, probe, *, id: Optional[str] = None, reference=None, matcher: str = "", gallery: str = "",
               explain: bool = False) -> "pb.fingerprint_pb2.VerifyResponse":
        """1:1 score of a probe against an enrolled id or a given reference (one of the two)."""
        if (id is None) == (reference is None):
            raise ValueError("id, reference: give exactly one")
        request = pb.fingerprint_pb2.VerifyRequest(probe=as_template(probe), matcher=matcher, gallery=gallery,
                                                   explain=explain)
        if id is not None:
            request.id = id
        else:
            request.reference.CopyFrom(as_template(reference))
        return self._unary(self.fingerprint.Verify, request, idempotent=True)

    def extract(self, image, *, ppi: float = 0, overlay: bool = False) -> "pb.fingerprint_pb2.ExtractResponse":
        """Minutiae template, quality (and with `overlay` a PNG for an examiner) of a
        fingerprint image: a FingerprintImage, or a path or bytes (`ppi` 0: the file's)."""
        if isinstance(image, pb.fingerprint_pb2.FingerprintImage):
            request_image = image
        elif isinstance(image, pb.fingerprint_pb2.FingerprintTemplate) and image.HasField("image"):
            request_image = image.image
        elif isinstance(image, (str, os.PathLike, bytes, bytearray, memoryview)):
            request_image = fingerprint_image(image, ppi=ppi).image
        else:
            raise TypeError(f"image: expected a FingerprintImage, path or bytes, got {type(image).__name__}")
        return self._unary(self.fingerprint.Extract, pb.fingerprint_pb2.ExtractRequest(
            image=request_image, overlay=overlay), idempotent=True)

    def list_galleries(self) -> List["pb.fingerprint_pb2.GalleryInfo"]:
        return list(self._unary(self.fingerprint.ListGalleries, pb.fingerprint_pb2.ListGalleriesRequest(),
                                idempotent=True).galleries)

    def create_gallery(self, gallery: str) -> "pb.fingerprint_pb2.GalleryInfo":
        return self._unary(self.fingerprint.CreateGallery, pb.fingerprint_pb2.CreateGalleryRequest(gallery=gallery),
                           idempotent=False)

    def delete_template(self, id: str, *, gallery: str = "") -> "pb.fingerprint_pb2.DeleteResponse":
        return self._unary(self.fingerprint.Delete, pb.fingerprint_pb2.DeleteRequest(id=id, gallery=gallery),
                           idempotent=True)
