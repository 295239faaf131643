"""tessera-client against real `tessera serve` processes: uploads, jobs
(register, CT reconstruction), fingerprints, watch resumed across a dropped
connection, downloads resumed from a partial file, previews, errors as
exceptions, retries honouring the server's pushback, and the examples.

Run by client_test.sh with the installed wheel's venv (TESSERA_BIN: the
tessera binary; TESSERA_EXAMPLES: the examples directory).
"""

import glob
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import grpc

import tessera_client
from tessera_client import pb

TESSERA = os.environ.get("TESSERA_BIN", "tessera")
EXAMPLES = os.environ.get("TESSERA_EXAMPLES", os.path.join(os.path.dirname(__file__), "..", "examples"))
TMP = os.environ.get("TEST_TMPDIR") or tempfile.mkdtemp(prefix="tessera-client-test-")
JobState = pb.common_pb2.JobState

ENROLLER_TOKEN = "enroller-token-0123456789abcdef"
READER_TOKEN = "reader-token-0123456789abcdef"
ADMIN_TOKEN = "admin-token-0123456789abcdef"


def shared_data_dir():
    """../shared/data beside the project root: $TESSERA_SHARED_DATA, else found
    from this file's runfile symlink into the source tree, else /work/shared/data."""
    if os.environ.get("TESSERA_SHARED_DATA"):
        return os.environ["TESSERA_SHARED_DATA"]
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__)))))
    for candidate in (os.path.join(root, "..", "shared", "data"), "/work/shared/data"):
        if os.path.isdir(os.path.join(candidate, "fingerprint")):
            return os.path.abspath(candidate)
    return None


def run_tessera(*args):
    subprocess.run([TESSERA, *args], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


class Server:
    """A `tessera serve` child on a free port, stopped with SIGTERM."""

    def __init__(self, name, *flags):
        self.dir = os.path.join(TMP, name)
        os.makedirs(self.dir, exist_ok=True)
        self.log = open(os.path.join(self.dir, "serve.log"), "w")
        self.process = subprocess.Popen(
            [TESSERA, "serve", "--grpc-port=0", "--metrics-port=-1", f"--data-root={self.dir}",
             "--drain-timeout-s=2", *flags], stdout=subprocess.PIPE, stderr=self.log, text=True)
        line = self.process.stdout.readline().strip()
        if not line.startswith("grpc_port="):
            raise RuntimeError(f"serve did not start ({line!r}); see {self.log.name}")
        self.address = f"127.0.0.1:{int(line.split('=')[1])}"

    def stop(self):
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


class CuttableProxy:
    """A TCP proxy to `target` whose open connections cut() drops at once (as a
    network failure would), while it keeps accepting new ones."""

    def __init__(self, target):
        host, port = target.rsplit(":", 1)
        self.target = (host, int(port))
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self.connections = 0
        self.sockets = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            with self.lock:
                self.connections += 1
                self.sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src, dst):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self):
        with self.lock:
            sockets, self.sockets = self.sockets, []
        for s in sockets:
            try:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                s.close()  # linger 0: the peer sees a reset
            except OSError:
                pass

    def close(self):
        self.listener.close()
        self.cut()


def setUpModule():
    global SERVER, DATA, FIXED, MOVING, GEOMETRY, SINOGRAM
    SERVER = Server("main", f"--token-file={write_tokens()}", "--local-slots=1")
    DATA = SERVER.dir
    # A small registration problem (32^3 phantom and a moved copy) and a small
    # parallel-beam CT sinogram, made by the tessera CLI.
    GEOMETRY = os.path.join(DATA, "geometry.json")
    SINOGRAM = os.path.join(DATA, "sinogram.nii.gz")
    FIXED = os.path.join(DATA, "fixed.nii.gz")
    MOVING = os.path.join(DATA, "moving", "moving.nii.gz")
    run_tessera("phantom", "geometry", "--type=parallel", "--size=48", f"--out={GEOMETRY}")
    run_tessera("phantom", "ct", f"--geometry={GEOMETRY}", f"--sinogram-out={SINOGRAM}")
    cone = os.path.join(DATA, "cone.json")
    run_tessera("phantom", "geometry", "--type=cone", "--size=32", f"--out={cone}")
    run_tessera("phantom", "ct", f"--geometry={cone}", f"--sinogram-out={os.path.join(DATA, 'cone_sino.nii.gz')}",
                f"--volume-out={FIXED}")
    run_tessera("synth", f"--image={FIXED}", f"--out={os.path.dirname(MOVING)}", "--rotation-deg=4",
                "--translation-mm=2", "--deformation-mm=1")


def tearDownModule():
    SERVER.stop()


def write_tokens():
    path = os.path.join(TMP, "tokens")
    with open(path, "w") as f:
        f.write(f"{ENROLLER_TOKEN} alice enroller\n{READER_TOKEN} rita reader\n{ADMIN_TOKEN} ada admin\n")
    for name, token in (("alice.token", ENROLLER_TOKEN), ("rita.token", READER_TOKEN)):
        with open(os.path.join(TMP, name), "w") as f:
            f.write(token + "\n")
    return path


def client(**kwargs):
    kwargs.setdefault("token", ENROLLER_TOKEN)
    return tessera_client.Client(kwargs.pop("address", SERVER.address), **kwargs)


FAST = dict(stages=["rigid", "affine"], scales=[2, 1], rigid_iterations=[8], affine_iterations=[8], metric="mse",
            device="cpu")


def run_example(name, *args):
    result = subprocess.run([sys.executable, "-I", os.path.join(EXAMPLES, name), "--server", SERVER.address,
                             "--token-file", os.path.join(TMP, "alice.token"), *args],
                            capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        raise AssertionError(f"{name} exited {result.returncode}: {result.stderr[-2000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


class InstalledWheelTest(unittest.TestCase):
    def test_imports_the_installed_package(self):
        venv = os.environ.get("TESSERA_CLIENT_VENV")
        if venv:
            self.assertTrue(os.path.realpath(tessera_client.__file__).startswith(os.path.realpath(venv)),
                            tessera_client.__file__)
        self.assertTrue(tessera_client.pb.scheduler_pb2.__name__.startswith("tessera_client._proto."))


class UploadTest(unittest.TestCase):
    def test_nifti_dicom_file_and_series(self):
        with client() as c:
            uploaded = c.upload_volume(FIXED)
            with open(FIXED, "rb") as f:
                data = f.read()
            self.assertTrue(uploaded.upload_id)
            self.assertEqual(uploaded.nbytes, len(data))
            self.assertEqual(uploaded.sha256, hashlib.sha256(data).hexdigest())
            shared = shared_data_dir()
            if shared is None:
                self.skipTest("shared data (DICOM series) not found")
            series = os.path.join(shared, "dicom", "known-geometry-24x38x3", "image")
            from_dir = c.upload_volume(series)
            from_list = c.upload_volume(sorted(glob.glob(os.path.join(series, "*"))))
            self.assertTrue(from_dir.upload_id)
            self.assertGreater(from_dir.nbytes, 0)
            self.assertEqual(from_dir.sha256, from_list.sha256)  # the same zip either way
            # A registration naming the uploaded series and NIfTI by file_id.
            job = c.register(from_dir, uploaded, **dict(FAST, scales=[1], stages=["rigid"]))
            self.assertIn(c.wait(job.job_id, timeout=90).state, (JobState.JOB_STATE_SUCCEEDED,))

    def test_upload_errors_name_the_problem(self):
        with client() as c:
            bad = os.path.join(TMP, "notes.txt")
            with open(bad, "w") as f:
                f.write("not an image")
            with self.assertRaises(tessera_client.TesseraError) as caught:
                c.upload_volume(bad)
            self.assertEqual(caught.exception.code, grpc.StatusCode.INVALID_ARGUMENT)
            with self.assertRaises(FileNotFoundError):
                c.upload_volume(os.path.join(TMP, "missing.nii.gz"))


class JobTest(unittest.TestCase):
    def test_register_result_download_resume_preview_delete(self):
        with client() as c:
            job = c.register(FIXED, MOVING, **FAST)
            self.assertIn(job.state, (JobState.JOB_STATE_QUEUED, JobState.JOB_STATE_RUNNING,
                                      JobState.JOB_STATE_SUCCEEDED))
            info = c.wait(job.job_id, timeout=90)
            self.assertEqual(info.state, JobState.JOB_STATE_SUCCEEDED)
            result = c.result(job.job_id)
            self.assertIsInstance(result, pb.registration_pb2.RegistrationResult)
            self.assertLess(result.final_loss, result.initial_loss)

            out = os.path.join(TMP, "download")
            files = c.download(job.job_id, out_dir=out)
            names = {f.name: f.bytes for f in c.job_result(job.job_id).files}
            self.assertEqual(sorted(files), sorted(os.path.join(out, n) for n in names))
            for path in files:
                self.assertEqual(os.path.getsize(path), names[os.path.relpath(path, out)])
            with open(os.path.join(out, "warped.nii.gz"), "rb") as f:
                warped = f.read()
            self.assertEqual(warped[:2], b"\x1f\x8b")

            # A partial download resumes at the .part file's size: its bytes are kept.
            again = os.path.join(TMP, "download-again")
            os.makedirs(again)
            prefix = b"\0" * 100
            with open(os.path.join(again, "warped.nii.gz.part"), "wb") as f:
                f.write(prefix)
            [resumed] = c.download(job.job_id, "warped.nii.gz", out_dir=again)
            with open(resumed, "rb") as f:
                self.assertEqual(f.read(), prefix + warped[100:])
            self.assertFalse(os.path.exists(resumed + ".part"))

            png = c.preview(job.job_id, max_edge=128)
            self.assertEqual(png[:8], b"\x89PNG\r\n\x1a\n")

            self.assertIn(job.job_id, [j.job_id for j in c.list_jobs(limit=50)])
            deleted = c.delete(job.job_id)
            self.assertGreater(deleted.results_deleted_unix_ms, 0)
            with self.assertRaises(tessera_client.TesseraError) as caught:
                c.result(job.job_id)
            self.assertEqual(caught.exception.code, grpc.StatusCode.FAILED_PRECONDITION)

    def test_watch_resumes_after_a_dropped_connection(self):
        proxy = CuttableProxy(SERVER.address)
        try:
            with client(address=proxy.address) as c:
                job = c.register(tessera_client.ServerPath(FIXED), tessera_client.ServerPath(MOVING),
                                 **dict(FAST, stages=["rigid", "affine", "deformable"], rigid_iterations=[30],
                                        affine_iterations=[30], deformable_iterations=[30]))
                sequences, states = [], []
                for event in c.watch(job.job_id, timeout=90):
                    sequences.append(event.sequence)
                    states.append(event.state)
                    if len(sequences) == 2:
                        proxy.cut()
                self.assertGreaterEqual(proxy.connections, 2, "the watch never reconnected")
                self.assertEqual(sequences, list(range(1, len(sequences) + 1)), "events lost or repeated")
                self.assertEqual(states[-1], JobState.JOB_STATE_SUCCEEDED)
                self.assertEqual(sequences[-1], c.get(job.job_id).last_sequence)
                # Resuming from any sequence number gives exactly the rest.
                rest = [e.sequence for e in c.watch(job.job_id, after_sequence=sequences[-3])]
                self.assertEqual(rest, sequences[-2:])
        finally:
            proxy.close()

    def test_traceparent_joins_the_callers_trace(self):
        traceparent = tessera_client.new_traceparent()
        with client(traceparent=traceparent) as c:
            job = c.register(tessera_client.ServerPath(FIXED), tessera_client.ServerPath(MOVING),
                             **dict(FAST, scales=[2], stages=["rigid"]))
            self.assertEqual(job.trace_id, tessera_client.trace_id_of(traceparent))
            events = list(c.watch(job.job_id))
            self.assertTrue(all(e.trace_id == job.trace_id for e in events), [e.trace_id for e in events])


class ErrorTest(unittest.TestCase):
    def test_statuses_are_exceptions_with_codes(self):
        with client() as c:
            with self.assertRaises(tessera_client.TesseraError) as caught:
                c.get("no-such-job")
            self.assertEqual(caught.exception.code, grpc.StatusCode.NOT_FOUND)
            self.assertIsInstance(caught.exception, grpc.RpcError)

            with self.assertRaises(tessera_client.TesseraError) as caught:
                c.submit(pb.registration_pb2.RegisterRequest(
                    fixed=pb.registration_pb2.VolumeSource(path=FIXED)))
            self.assertEqual(caught.exception.code, grpc.StatusCode.INVALID_ARGUMENT)
            self.assertIn("moving", caught.exception.details)

            with self.assertRaises(tessera_client.TesseraError) as caught:
                c.register(tessera_client.ServerPath("/etc/passwd.nii.gz"), tessera_client.ServerPath(MOVING))
            self.assertIn(caught.exception.code, (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.NOT_FOUND))

        with tessera_client.Client(SERVER.address) as anonymous:
            with self.assertRaises(tessera_client.TesseraError) as caught:
                anonymous.list_jobs()
            self.assertEqual(caught.exception.code, grpc.StatusCode.UNAUTHENTICATED)

        with client(token=None, token_file=os.path.join(TMP, "rita.token")) as reader:
            reader.list_jobs()  # a reader may list
            with self.assertRaises(tessera_client.TesseraError) as caught:
                reader.register(tessera_client.ServerPath(FIXED), tessera_client.ServerPath(MOVING))
            self.assertEqual(caught.exception.code, grpc.StatusCode.PERMISSION_DENIED)

    def test_bad_arguments_are_refused_before_any_call(self):
        with self.assertRaises(ValueError):
            tessera_client.Client("localhost:1", traceparent="00-xyz")
        with self.assertRaises(ValueError):
            tessera_client.Client("localhost:1", token="a", token_file="b")
        with client() as c, self.assertRaises(ValueError):
            c.verify(b"x")


class PushbackTest(unittest.TestCase):
    """A full queue answers RESOURCE_EXHAUSTED with grpc-retry-pushback-ms;
    the client waits that long and tries again."""

    def test_full_queue_is_retried_after_the_pushback(self):
        server = Server("pushback", f"--data-root={DATA}", "--max-queued=1", "--local-slots=1")
        try:
            with client(address=server.address, token=None) as c:
                slow = dict(FAST, stages=["rigid", "affine", "deformable"], scales=[1], rigid_iterations=[200],
                            affine_iterations=[200], deformable_iterations=[200], patience=1000)
                running = c.register(tessera_client.ServerPath(FIXED), tessera_client.ServerPath(MOVING), **slow)
                for event in c.watch(running.job_id, timeout=90):
                    if event.state == JobState.JOB_STATE_RUNNING:
                        break
                queued = []
                no_retry = tessera_client.Client(server.address, retry=tessera_client.NO_RETRY)
                refused = None
                for _ in range(4):
                    try:
                        queued.append(no_retry.register(tessera_client.ServerPath(FIXED),
                                                        tessera_client.ServerPath(MOVING), **slow).job_id)
                    except tessera_client.TesseraError as e:
                        refused = e
                        break
                no_retry.close()
                self.assertIsNotNone(refused, "the queue never filled")
                self.assertEqual(refused.code, grpc.StatusCode.RESOURCE_EXHAUSTED)
                self.assertEqual(refused.retry_after_ms, 2000)

                refusals = []

                class RecordingPolicy(tessera_client.RetryPolicy):
                    def delay_s(self, error, attempt, idempotent):
                        delay = super().delay_s(error, attempt, idempotent)
                        refusals.append((error.code, delay))
                        return delay

                def free_the_queue():  # once the submit below was refused
                    while not refusals:
                        time.sleep(0.01)
                    for job_id in [running.job_id] + queued:
                        c.cancel(job_id)

                freer = threading.Thread(target=free_the_queue, daemon=True)
                freer.start()
                start = time.monotonic()
                c.retry = RecordingPolicy()
                accepted = c.register(tessera_client.ServerPath(FIXED), tessera_client.ServerPath(MOVING),
                                      **dict(FAST, scales=[2], stages=["rigid"]))
                elapsed = time.monotonic() - start
                freer.join(timeout=30)
                self.assertEqual(refusals[0], (grpc.StatusCode.RESOURCE_EXHAUSTED, 2.0))
                self.assertGreaterEqual(elapsed, 1.9, "the retry did not wait for the pushback")
                self.assertEqual(c.wait(accepted.job_id, timeout=90).state, JobState.JOB_STATE_SUCCEEDED)
                with self.assertRaises(tessera_client.JobFailedError) as caught:
                    c.wait(running.job_id, timeout=90)
                self.assertEqual(caught.exception.job.state, JobState.JOB_STATE_CANCELLED)
                self.assertEqual(caught.exception.code, grpc.StatusCode.CANCELLED)
        finally:
            server.stop()


class TlsTest(unittest.TestCase):
    """TLS with the server's CA, and the token as call credentials on it."""

    def test_tls_and_token(self):
        cert, key = os.path.join(TMP, "server.pem"), os.path.join(TMP, "server.key")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
                        "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
                        "-keyout", key, "-out", cert], check=True, capture_output=True)
        server = Server("tls", f"--tls-cert={cert}", f"--tls-key={key}", f"--token-file={write_tokens()}")
        try:
            with client(address=server.address, tls_ca=cert, token=READER_TOKEN) as c:
                self.assertEqual(c.list_jobs(), [])
            with tessera_client.Client(server.address, tls_ca=cert) as anonymous:
                with self.assertRaises(tessera_client.TesseraError) as caught:
                    anonymous.list_jobs()
                self.assertEqual(caught.exception.code, grpc.StatusCode.UNAUTHENTICATED)
            with client(address=server.address, token=READER_TOKEN, retry=tessera_client.NO_RETRY,
                        timeout=5) as plaintext:
                with self.assertRaises(tessera_client.TesseraError) as caught:
                    plaintext.list_jobs()
                self.assertEqual(caught.exception.code, grpc.StatusCode.UNAVAILABLE)
        finally:
            server.stop()


class FingerprintTest(unittest.TestCase):
    def test_enroll_search_verify(self):
        shared = shared_data_dir()
        if shared is None:
            self.skipTest("shared fingerprint data not found")
        db = os.path.join(shared, "fingerprint", "fvc2002", "DB1_B")
        with client() as c, client(token=ADMIN_TOKEN) as admin:
            before = {g.gallery: g.size for g in admin.list_galleries()}.get("default", 0)
            for finger in range(101, 106):
                enrolled = c.enroll(f"f{finger}", os.path.join(db, f"{finger}_1.iso"))
                self.assertGreater(enrolled.minutiae, 0)
                self.assertEqual(enrolled.quality, -1)  # a template, not an image
            # DB1 images are 500 ppi; TIFFs that do not say so need it given.
            from_image = c.enroll("f106-image", tessera_client.fingerprint_image(os.path.join(db, "106_1.tif"), ppi=500))
            self.assertGreater(from_image.quality, 0)
            self.assertEqual({g.gallery: g.size for g in admin.list_galleries()}.get("default"), before + 6)
            with self.assertRaises(tessera_client.TesseraError) as caught:
                c.enroll("f101", os.path.join(db, "101_2.iso"))
            self.assertEqual(caught.exception.code, grpc.StatusCode.ALREADY_EXISTS)
            top = c.search(os.path.join(db, "103_2.iso"), top_k=3).candidates
            self.assertEqual(top[0].id, "f103")
            image_top = c.search(tessera_client.fingerprint_image(os.path.join(db, "106_2.tif"), ppi=500),
                                 top_k=3).candidates
            self.assertEqual(image_top[0].id, "f106-image")
            mate = c.verify(os.path.join(db, "104_3.iso"), id="f104").score
            non_mate = c.verify(os.path.join(db, "104_3.iso"), id="f105").score
            self.assertGreater(mate, non_mate)
            extracted = c.extract(os.path.join(db, "107_1.tif"), ppi=500, overlay=True)
            self.assertGreater(extracted.minutiae, 10)
            self.assertEqual(extracted.overlay_png[:8], b"\x89PNG\r\n\x1a\n")
            with self.assertRaises(tessera_client.TesseraError) as caught:
                c.extract(os.path.join(db, "107_1.tif"))  # a TIFF without its resolution
            self.assertEqual(caught.exception.code, grpc.StatusCode.FAILED_PRECONDITION)
            with self.assertRaises(tessera_client.TesseraError) as caught:
                c.enroll("bad", b"not a template")
            self.assertEqual(caught.exception.code, grpc.StatusCode.INVALID_ARGUMENT)


class ExamplesTest(unittest.TestCase):
    """The examples, as users run them, against the server."""

    def test_register_two_volumes(self):
        out = os.path.join(TMP, "example-register")
        summary = run_example("register_two_volumes.py", "--fixed", FIXED, "--moving", MOVING, "--stages",
                              "rigid,affine", "--scales", "2,1", "--iterations", "8", "--metric", "mse",
                              "--out-dir", out, "--progress")
        self.assertIn(os.path.join(out, "warped.nii.gz"), summary["files"])
        with open(summary["preview"], "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")

    def test_ct_reconstruction(self):
        out = os.path.join(TMP, "example-recon")
        summary = run_example("ct_reconstruction.py", "--geometry", GEOMETRY, "--sinogram", SINOGRAM,
                              "--method", "fbp", "--out-dir", out)
        self.assertEqual(summary["method"], "fbp")
        self.assertEqual(summary["dims"][:2], [48, 48])
        self.assertIn(os.path.join(out, "reconstruction.nii.gz"), summary["files"])
        self.assertTrue(os.path.getsize(summary["preview"]) > 0)

    def test_fingerprint_search(self):
        shared = shared_data_dir()
        if shared is None:
            self.skipTest("shared fingerprint data not found")
        db = os.path.join(shared, "fingerprint", "fvc2002", "DB2_B")
        gallery = [os.path.join(db, f"{finger}_1.iso") for finger in range(101, 109)]
        summary = run_example("fingerprint_search.py", "--enroll", *gallery, "--probe",
                              os.path.join(db, "107_4.iso"), "--top-k", "3")
        self.assertEqual(summary["enrolled"], 8)
        self.assertEqual(summary["candidates"][0]["id"], "107_1")


class _XmlResult(unittest.TextTestResult):
    """Also records each case's outcome, so Bazel's test XML ($XML_OUTPUT_FILE)
    lists every case (./tessera test counts cases from it)."""

    outcomes = []

    def addSuccess(self, test):
        super().addSuccess(test)
        self.outcomes.append((test.id(), "passed", ""))

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self.outcomes.append((test.id(), "failed", self._exc_info_to_string(err, test)))

    def addError(self, test, err):
        super().addError(test, err)
        self.outcomes.append((getattr(test, "id", lambda: str(test))(), "failed", self._exc_info_to_string(err, test)))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self.outcomes.append((test.id(), "skipped", reason))


def _write_test_xml(path):
    from xml.sax.saxutils import quoteattr
    cases = []
    for name, outcome, text in _XmlResult.outcomes:
        classname, _, case = name.rpartition(".")
        body = {"failed": f"<failure message={quoteattr(text[-4000:])}/>",
                "skipped": f"<skipped message={quoteattr(text)}/>"}.get(outcome, "")
        result = "skipped" if outcome == "skipped" else "completed"
        cases.append(f"<testcase name={quoteattr(case)} classname={quoteattr(classname)} "
                     f"result=\"{result}\">{body}</testcase>")
    with open(path, "w") as f:
        f.write('<?xml version="1.0" encoding="UTF-8"?>\n<testsuites><testsuite name="client_e2e_test" '
                f'tests="{len(cases)}">' + "".join(cases) + "</testsuite></testsuites>\n")


if __name__ == "__main__":
    program = unittest.main(testRunner=unittest.TextTestRunner(resultclass=_XmlResult, verbosity=2), exit=False)
    if os.environ.get("XML_OUTPUT_FILE"):
        _write_test_xml(os.environ["XML_OUTPUT_FILE"])
    sys.exit(0 if program.result.wasSuccessful() else 1)
