"""The operator console driven by headless Chromium against a real server.

Starts `tessera serve --http-port 0 --token-file ... --audit-log ...` (CPU),
opens /console/, signs in, submits a registration (the MNI ch2 template and a
`tessera synth` deformation of it), watches it reach SUCCEEDED, checks its
preview image decoded, visits Jobs, Workers, Queues, Galleries, Atlases and
Audit, checks that a reader is refused the audit trail and that a wrong token
and server error text are shown as text, and saves a screenshot per view to
$TEST_UNDECLARED_OUTPUTS_DIR. Run by console_browser_test.sh.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

from selenium import webdriver
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException, TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

TEMPLATE = '/usr/share/mricron/templates/ch2.nii.gz'  # Debian mricron-data
ADMIN_TOKEN = 'ada-admin-token-0123456789abcdef'
READER_TOKEN = 'rita-reader-token-0123456789abcdef'
JOB_TIMEOUT_S = 120


def log(message):
    print(f'[{time.strftime("%H:%M:%S")}] {message}', flush=True)


class Server:
    """A `tessera serve` child; its stdout gives the ports (key=value lines)."""

    def __init__(self, binary, work):
        self.log_path = os.path.join(OUT, 'serve.log')
        tokens = os.path.join(work, 'tokens')
        with open(tokens, 'w') as f:
            f.write(f'{ADMIN_TOKEN} ada admin\n{READER_TOKEN} rita reader\n')
        args = [binary, 'serve', '--grpc-port=0', '--metrics-port=-1', '--http-port=0', '--device=cpu',
                '--drain-timeout-s=1', f'--data-root={work}', f'--state-dir={work}/state',
                f'--galleries-root={work}/galleries', f'--token-file={tokens}',
                f'--audit-log={work}/audit.jsonl']
        log('starting ' + ' '.join(args))
        self.stderr = open(self.log_path, 'w')
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self.stderr, text=True)
        self.ports = {}
        ready = threading.Event()

        def read_ports():
            for line in self.proc.stdout:
                m = re.match(r'^(\w+_port)=(-?\d+)$', line.strip())
                if m:
                    self.ports[m.group(1)] = int(m.group(2))
                if 'http_port' in self.ports:
                    ready.set()
            ready.set()

        threading.Thread(target=read_ports, daemon=True).start()
        if not ready.wait(60) or 'http_port' not in self.ports:
            self.stop()
            raise AssertionError(f'serve printed no http_port= line (ports {self.ports}); log:\n{self.log_tail()}')
        self.url = f'http://127.0.0.1:{self.ports["http_port"]}'
        log(f'serve is up: {self.ports}')

    def log_tail(self, lines=40):
        self.stderr.flush()
        with open(self.log_path, errors='replace') as f:
            return ''.join(f.readlines()[-lines:])

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.stderr.close()


def make_browser(profile, driver_log):
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which('chromium')
    for arg in ['--headless=new', '--disable-gpu', '--disable-dev-shm-usage', '--window-size=1500,1000',
                f'--user-data-dir={profile}', '--no-first-run', '--disable-extensions']:
        options.add_argument(arg)
    if os.geteuid() == 0:
        options.add_argument('--no-sandbox')  # Chromium's sandbox refuses to run as root
    # Debian's selenium 4.8 (log_path; newer ones call it log_output).
    service = Service(executable_path=shutil.which('chromedriver'), log_path=driver_log)
    return webdriver.Chrome(service=service, options=options)


class Console:
    """The steps a person takes in the console, each checked."""

    def __init__(self, driver, url):
        self.d = driver
        self.url = url
        self.shots = []

    def wait(self, condition, timeout=20, what=''):
        try:
            # The views redraw themselves: an element met mid-redraw is looked up again.
            return WebDriverWait(self.d, timeout, poll_frequency=0.2,
                                 ignored_exceptions=(NoSuchElementException, StaleElementReferenceException)).until(condition)
        except TimeoutException:
            raise AssertionError(f'timed out after {timeout} s waiting for {what}') from None

    def visible(self, css, timeout=20):
        return self.wait(EC.visibility_of_element_located((By.CSS_SELECTOR, css)), timeout, css)

    def shot(self, name):
        path = os.path.join(OUT, f'console-{name}.png')
        self.d.save_screenshot(path)
        self.shots.append(path)
        log(f'screenshot {path}')

    def go(self, view):
        self.d.execute_script('location.hash = arguments[0]', view)
        self.wait(lambda d: d.find_element(By.ID, 'view').get_attribute('data-view') == view.split('/')[0].lstrip('#'),
                  10, f'view {view}')

    def sign_in(self, token):
        box = self.visible('#login-token')
        box.clear()
        box.send_keys(token)
        self.d.find_element(By.CSS_SELECTOR, '#login-form button[type=submit]').click()

    def sign_out(self):
        self.d.find_element(By.ID, 'logout').click()
        self.visible('#login-token')


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def submit_registration(console, fixed, moving, stages, scales, iterations, shot=None, upload_moving=False):
    """Fills the Submit view's registration form (the moving image a server
    path, or a file the browser uploads first); returns the job id the console opened."""
    d = console.d
    console.go('#submit')
    console.visible('#fixed-path').send_keys(fixed)
    d.find_element(By.ID, 'moving-file' if upload_moving else 'moving-path').send_keys(moving)
    for field, value in [('reg-stages', stages), ('reg-scales', scales), ('reg-iterations', iterations)]:
        box = d.find_element(By.ID, field)
        box.clear()
        box.send_keys(value)
    d.find_element(By.CSS_SELECTOR, '#reg-device option[value=cpu]').click()
    if shot:
        console.shot(shot)
    d.find_element(By.ID, 'register-submit').click()
    console.wait(lambda d: d.execute_script('return location.hash').startswith('#job/') or
                 d.find_elements(By.CSS_SELECTOR, '#register-form .error'), 20, 'the job view after submit')
    refusal = d.find_elements(By.CSS_SELECTOR, '#register-form .error')
    check(not refusal, f'the registration was refused: {refusal[0].text if refusal else ""}')
    return d.execute_script('return decodeURIComponent(location.hash.slice(5))')


def run(console, work):
    d = console.d
    d.get(console.url + '/console/')
    console.visible('#login-form')
    check('Tessera' in d.title, f'page title {d.title!r}')
    console.shot('login')

    # A wrong token is refused at sign-in with the gateway's error shown.
    console.sign_in('not-a-token')
    error = console.visible('#login-error .error')
    check('UNAUTHENTICATED' in error.text, f'wrong token: {error.text!r}')
    check(d.execute_script("return sessionStorage.getItem('tessera.token')") is None, 'a refused token was kept')

    console.sign_in(ADMIN_TOKEN)
    console.visible('#nav')
    console.wait(lambda d: d.find_element(By.ID, 'view').get_attribute('data-view') == 'jobs', 10, 'jobs view')
    check(d.execute_script("return sessionStorage.getItem('tessera.token')") == ADMIN_TOKEN, 'token not in sessionStorage')
    check(d.execute_script('return document.cookie') == '', 'the console set a cookie')

    # Server text is shown as text: a spec naming a type with markup in it
    # comes back in the error message and must not become an element.
    console.go('#submit')
    raw = console.visible('#raw-request')
    raw.clear()
    raw.send_keys('{"spec": {"spec": {"@type": "type.googleapis.com/tessera.v1.<b id=injected>x</b>"}}}')
    d.find_element(By.CSS_SELECTOR, '#raw-form button[type=submit]').click()
    error = console.visible('#raw-form .error')
    check('<b id=injected>' in error.text, f'the error should quote the markup as text: {error.text!r}')
    check(not d.find_elements(By.ID, 'injected'), 'server text was parsed as HTML')

    # Submit a registration of two server-side volumes; the console opens the job.
    fixed, moving = os.path.join(work, 'ch2.nii.gz'), os.path.join(work, 'synth', 'moving.nii.gz')
    job_id = submit_registration(console, fixed, moving, 'rigid,affine', '4', '20', shot='submit')
    log(f'submitted job {job_id}')
    final = console.wait(lambda d: d.find_element(By.ID, 'job-stream-status').get_attribute('data-final'),
                         JOB_TIMEOUT_S, 'the job to end')
    check(final == 'SUCCEEDED', f'job ended {final}: {d.find_element(By.ID, "job-fields").text}')
    events = d.find_elements(By.CSS_SELECTOR, '#job-events li')
    check(len(events) >= 3, f'only {len(events)} events shown')
    check('SUCCEEDED' in events[-1].text, f'last event: {events[-1].text!r}')
    fields = d.find_element(By.ID, 'job-fields').text
    check(re.search(r'Trace id\s+[0-9a-f]{32}', fields), f'no trace id in the job fields:\n{fields}')
    image = console.visible('#job-preview-image', 30)
    console.wait(lambda d: d.execute_script('return arguments[0].complete && arguments[0].naturalWidth', image) > 0,
                 20, 'the preview image to decode')
    width = d.execute_script('return arguments[0].naturalWidth', image)
    log(f'preview decoded, {width} px wide')
    check(d.find_elements(By.CSS_SELECTOR, '#job-results table.files td'), 'no result files listed')
    d.execute_script('arguments[0].scrollIntoView()', image)
    console.shot('job')

    # A long registration of an image uploaded from the browser (PUT
    # /v1/uploads/registration, then VolumeSource.file_id), cancelled from the
    # Jobs list while it runs; the list also shows the first job, finished.
    long_id = submit_registration(console, fixed, moving, 'rigid,affine,deformable', '2,1', '400', upload_moving=True)
    log(f'submitted job {long_id} (to cancel)')
    console.wait(lambda d: any('RUNNING' in li.text for li in d.find_elements(By.CSS_SELECTOR, '#job-events li')),
                 30, 'the long job to start')
    console.go('#jobs')
    # The list is redrawn every 2 s: read a row's text in one script call.
    row_text = lambda jid: d.execute_script(
        'const a = document.querySelector(`#jobs-table a.job-link[href="#job/${arguments[0]}"]`);'
        'return a ? a.closest("tr").innerText : "";', jid)
    console.wait(lambda d: row_text(job_id), 20, 'the first job in the list')
    row = row_text(job_id)
    check('SUCCEEDED' in row and 'ada' in row and 'registration' in row, f'job row: {row!r}')
    check(re.search(r'[0-9a-f]{32}', row), f'no trace id in the row: {row!r}')
    console.wait(lambda d: 'RUNNING' in row_text(long_id), 20, 'the long job RUNNING in the list')
    console.shot('jobs')
    console.visible(f'#jobs-table button.cancel[data-job="{long_id}"]').click()
    console.wait(lambda d: 'CANCELLED' in row_text(long_id), 30, 'the cancelled job to show CANCELLED')
    log('the long job was cancelled from the list')

    console.go('#workers')
    workers = console.visible('table.workers')
    check('healthy' in workers.text and 'registration' in workers.text, f'workers: {workers.text!r}')
    console.shot('workers')

    console.go('#queues')
    cards = console.visible('#stat-cards')
    check('Jobs queued' in cards.text and 'RPCs in flight' in cards.text, f'cards: {cards.text!r}')
    samples = console.visible('table.samples')
    check('tessera_scheduler_jobs' in samples.text, 'no tessera_scheduler_jobs sample')
    console.shot('queues')

    console.go('#galleries')
    galleries = console.wait(lambda d: d.find_elements(By.CSS_SELECTOR, '#view .content table.galleries, #view .content .empty'),
                             20, 'galleries')
    log(f'galleries: {galleries[0].text!r}')
    console.shot('galleries')

    console.go('#atlases')
    atlases = console.wait(lambda d: d.find_elements(By.CSS_SELECTOR, '#view .content table.atlases, #view .content .empty'),
                           20, 'atlases')
    log(f'atlases: {atlases[0].text!r}')

    console.go('#audit')
    console.visible('table.audit')
    methods = [td.text for td in d.find_elements(By.CSS_SELECTOR, 'table.audit tbody tr td:nth-child(5)')]
    principals = {td.text for td in d.find_elements(By.CSS_SELECTOR, 'table.audit tbody tr td:nth-child(3)')}
    check(len(methods) >= 15, f'only {len(methods)} audit records shown: {methods}')
    for method in ['SchedulerService/Submit', 'RegistrationService/UploadFile', 'RegistrationService/Register',
                   'SchedulerService/Cancel', 'SchedulerService/GetPreview']:
        check(f'/tessera.v1.{method}' in methods, f'no {method} in the audit records: {methods}')
    check('ada' in principals, f'audit principals: {principals}')
    traces = [td.text for td in d.find_elements(By.CSS_SELECTOR, 'table.audit tbody tr td:nth-child(7)')]
    check(all(re.fullmatch(r'[0-9a-f]{32}', t) for t in traces), f'audit trace ids: {traces}')
    console.shot('audit')

    # A reader signs in and is told the audit trail is for admins.
    console.sign_out()
    console.sign_in(READER_TOKEN)
    console.visible('#nav')
    console.go('#audit')
    refused = console.visible('#audit-refused')
    check('admin' in refused.text and 'PERMISSION_DENIED' in refused.text, f'reader audit: {refused.text!r}')
    console.shot('audit-reader')


def main():
    global OUT
    OUT = os.environ.get('TEST_UNDECLARED_OUTPUTS_DIR') or tempfile.mkdtemp(prefix='console-shots-')
    os.makedirs(OUT, exist_ok=True)
    work = tempfile.mkdtemp(prefix='console-', dir=os.environ.get('TEST_TMPDIR'))
    binary = os.path.abspath(os.environ.get('TESSERA_BIN', 'cli/tessera'))
    check(os.access(binary, os.X_OK), f'no tessera binary at {binary}')
    check(os.path.exists(TEMPLATE), f'{TEMPLATE} is missing (Debian mricron-data)')
    # The fixed image under the server's data root, and a moving image with a
    # known deformation of it (seconds on CPU).
    fixed = os.path.join(work, 'ch2.nii.gz')
    shutil.copyfile(TEMPLATE, fixed)
    subprocess.run([binary, 'synth', '--image', fixed, '--out', os.path.join(work, 'synth'), '--seed', '3'],
                   check=True, stdout=subprocess.DEVNULL)
    os.environ['HOME'] = work  # Chromium writes under $HOME even with --user-data-dir
    server = Server(binary, work)
    driver = None
    started = time.time()
    try:
        driver_log = os.path.join(work, 'chromedriver.log')  # kept with the outputs only on failure (MBs)
        driver = make_browser(os.path.join(work, 'chromium-profile'), driver_log)
        console = Console(driver, server.url)
        run(console, work)
        log(f'PASSED in {time.time() - started:.1f} s; {len(console.shots)} screenshots in {OUT}')
        return 0
    except Exception as e:  # report what the page and the server said
        log(f'FAILED: {e}')
        if os.path.exists(os.path.join(work, 'chromedriver.log')):
            shutil.copy(os.path.join(work, 'chromedriver.log'), OUT)
        if driver is not None:
            try:
                driver.save_screenshot(os.path.join(OUT, 'console-failure.png'))
                with open(os.path.join(OUT, 'console-failure.html'), 'w') as f:
                    f.write(driver.page_source)
                for entry in driver.get_log('browser'):
                    log(f'browser: {entry}')
            except Exception as inner:  # the browser itself may be gone
                log(f'(no page state: {inner})')
        log('serve log tail:\n' + server.log_tail())
        return 1
    finally:
        if driver is not None:
            driver.quit()
        server.stop()


if __name__ == '__main__':
    sys.exit(main())
