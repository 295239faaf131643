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
from selenium.common.exceptions import TimeoutException
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


def make_browser(profile):
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which('chromium')
    for arg in ['--headless=new', '--disable-gpu', '--disable-dev-shm-usage', '--window-size=1500,1000',
                f'--user-data-dir={profile}', '--no-first-run', '--disable-extensions']:
        options.add_argument(arg)
    if os.geteuid() == 0:
        options.add_argument('--no-sandbox')  # Chromium's sandbox refuses to run as root
    # Debian's selenium 4.8 (log_path; newer ones call it log_output).
    service = Service(executable_path=shutil.which('chromedriver'), log_path=os.path.join(OUT, 'chromedriver.log'))
    return webdriver.Chrome(service=service, options=options)


class Console:
    """The steps a person takes in the console, each checked."""

    def __init__(self, driver, url):
        self.d = driver
        self.url = url
        self.shots = []

    def wait(self, condition, timeout=20, what=''):
        try:
            return WebDriverWait(self.d, timeout, poll_frequency=0.2).until(condition)
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
    moving = os.path.join(work, 'synth', 'moving.nii.gz')
    console.visible('#fixed-path').send_keys(os.path.join(work, 'ch2.nii.gz'))
    d.find_element(By.ID, 'moving-path').send_keys(moving)
    for field, value in [('reg-stages', 'rigid,affine'), ('reg-scales', '4'), ('reg-iterations', '20')]:
        box = d.find_element(By.ID, field)
        box.clear()
        box.send_keys(value)
    d.find_element(By.CSS_SELECTOR, '#reg-device option[value=cpu]').click()
    console.shot('submit')
    d.find_element(By.ID, 'register-submit').click()
    console.wait(lambda d: d.execute_script('return location.hash').startswith('#job/') or
                 d.find_elements(By.CSS_SELECTOR, '#register-form .error'), 20, 'the job view after submit')
    refusal = d.find_elements(By.CSS_SELECTOR, '#register-form .error')
    check(not refusal, f'the registration was refused: {refusal[0].text if refusal else ""}')
    job_id = d.execute_script('return decodeURIComponent(location.hash.slice(5))')
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

    # The Jobs list shows it, finished, with its owner and trace id.
    console.go('#jobs')
    row = console.visible(f'#jobs-table a.job-link[href="#job/{job_id}"]').find_element(By.XPATH, './ancestor::tr')
    check('SUCCEEDED' in row.text and 'ada' in row.text and 'registration' in row.text, f'job row: {row.text!r}')
    console.shot('jobs')

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
    audit = console.visible('table.audit')
    check('Submit' in audit.text and 'ada' in audit.text, f'audit records: {audit.text[:500]!r}')
    check(re.search(r'[0-9a-f]{32}', audit.text), 'audit records carry no trace id')
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
        driver = make_browser(os.path.join(work, 'chromium-profile'))
        console = Console(driver, server.url)
        run(console, work)
        log(f'PASSED in {time.time() - started:.1f} s; {len(console.shots)} screenshots in {OUT}')
        return 0
    except Exception as e:  # report what the page and the server said
        log(f'FAILED: {e}')
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
