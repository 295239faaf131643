# Emulates CompactRelaxSelection's pair walk and survivor queue (one warp, 32 lanes).
import random
def popc(x): return bin(x).count('1')
for trial in range(3000):
    p = random.randint(2, 32); rate = random.choice([0, 0.05, 0.3, 1.0])
    surv = {}
    seen = set(); done = []
    queue = [None]*64; queued = 0; maxq = 0
    def process(first, count):
        for lane in range(32):
            if lane < count:
                pr = queue[first+lane]; assert pr is not None
                done.append(pr); queue[first+lane] = None
    half = p >> 1
    for step in range(1, half+1):
        votes = 0; want = {}
        for lane in range(32):
            k = lane + step
            if k >= p: k -= p
            active = lane < p and (2*step != p or lane < half)
            if active:
                pair = frozenset((lane, k)); assert pair not in seen and lane != k; seen.add(pair)
                s = random.random() < rate
                if s: votes |= 1 << lane; want[lane] = (lane, k)
        for lane, pr in want.items():
            pos = queued + popc(votes & ((1 << lane) - 1)); assert queue[pos] is None; queue[pos] = pr
        queued += popc(votes); maxq = max(maxq, queued); assert queued <= 63
        if queued >= 32:
            queued -= 32; process(queued, 32)
    if queued > 0: process(0, queued)
    assert len(seen) == p*(p-1)//2, (p, len(seen))
    assert all(q is None for q in queue)
    assert len(done) == len(set(done))
print("ok")
