#!/usr/bin/env python3
# Runs a command and prints each stdout/stderr line with its time since launch,
# then the exit time: where a command's wall time goes outside its own timers.
import subprocess, sys, threading, time
t0 = time.monotonic()
p = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1)
out = []
def pump(stream, tag):
    for line in stream:
        out.append((time.monotonic() - t0, tag, line.rstrip()[:160]))
ts = [threading.Thread(target=pump, args=(p.stdout, 'out')), threading.Thread(target=pump, args=(p.stderr, 'err'))]
for t in ts: t.start()
rc = p.wait()
t_exit = time.monotonic() - t0
for t in ts: t.join()
for t, tag, line in sorted(out):
    print(f"{t:7.3f} {tag} {line}")
print(f"{t_exit:7.3f} exit rc={rc}")
