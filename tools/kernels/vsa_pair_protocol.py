#!/usr/bin/env python3
"""A model check of the pair block-sparse kernel's load protocol (src/ops/cuda/vsa_attention_hopper.cu,
bsa_pair_sm90): one producer walking two key-tile lists position by position into one ring of stages (a
position both tiles list alike is one load for both, else A's load then B's), full / empty mbarriers with
phase-parity waits, TMA loads landing after random delays, and two consumers stepping as the kernel does (K
of step j with V of step j−1; K released after S, V after P·V; before waiting for use u of a stage to be full,
a wait for use u − 1 to be released) at random speeds. Checks that every consumer step reads the tile it
expects and that nothing deadlocks, over random lists (exempt and compete, shared positions, out-of-range
entries, a tile alone, prefix pairs) and ring depths 2, 3, 4, 6. Needs no GPU.

    python3 tools/kernels/vsa_pair_protocol.py [cases [seed]]        (default 3000 cases)
    python3 tools/kernels/vsa_pair_protocol.py --no-empty-wait       (the protocol without that wait: fails)"""
import random
import sys


class Barrier:
    def __init__(self, count):
        self.count, self.pending, self.phase, self.tx = count, count, 0, 0

    def arrive(self, n=1):
        self.pending -= n
        assert self.pending >= 0, "more arrivals than the barrier's count"
        self.settle()

    def settle(self):
        if self.pending == 0 and self.tx == 0:
            self.phase += 1
            self.pending = self.count

    def done(self, parity):  # mbarrier.try_wait.parity: the phase of this parity has completed
        return (self.phase & 1) != parity


def run(la, lb, dense, stages, seed, empty_wait=True):
    rnd = random.Random(seed)
    k_full = [Barrier(1) for _ in range(stages)]
    v_full = [Barrier(1) for _ in range(stages)]
    k_empty = [Barrier(8) for _ in range(stages)]
    v_empty = [Barrier(8) for _ in range(stages)]
    k_data, v_data = [None] * stages, [None] * stages
    ca, cb = len(la), len(lb) if lb is not None else 0
    in_flight = []  # [delay, 'k' / 'v', stage, tile]

    def shared_at(j):
        return j < ca and j < cb and (dense or la[j] == lb[j])

    def producer():
        e = 0
        for j in range(max(ca, cb)):
            tiles = [la[j]] if shared_at(j) else ([la[j]] if j < ca else []) + ([lb[j]] if j < cb else [])
            for kt in tiles:
                st, ph = e % stages, (e // stages) & 1
                for full, empty, kind in ((k_full, k_empty, "k"), (v_full, v_empty, "v")):
                    if e >= stages:
                        while not empty[st].done(ph ^ 1):
                            yield
                    full[st].pending -= 1  # arrive.expect_tx
                    full[st].tx += 1
                    in_flight.append([rnd.randint(0, 6), kind, st, kt])
                    yield
                e += 1

    def consumer(b):
        own = lb if b else la
        count = cb if b else ca
        walk = {"j": 0, "base": 0}

        def take():
            j = walk["j"]
            ia, ib, sh = j < ca, j < cb, shared_at(j)
            e = walk["base"] + (1 if b and ia and not sh else 0)
            walk["base"] += 1 if sh else int(ia) + int(ib)
            walk["j"] += 1
            return {"slot": e % stages, "parity": (e // stages) & 1, "first": e < stages, "shared": sh,
                    "tile": own[j]}

        def wait_full(full, empty, s):
            if empty_wait and not s["first"]:
                while not empty[s["slot"]].done(s["parity"] ^ 1):
                    yield
            while not full[s["slot"]].done(s["parity"]):
                yield

        def release(empty, s):
            for _ in range(4):  # one elected lane per warp
                empty[s["slot"]].arrive(1 if s["shared"] else 2)

        def pause():
            for _ in range(rnd.randint(0, 3)):
                yield

        cur = take()
        yield from wait_full(k_full, k_empty, cur)
        assert k_data[cur["slot"]] == cur["tile"], ("K", b, 0, cur, k_data[cur["slot"]])
        yield from pause()
        release(k_empty, cur)
        prev = cur
        for j in range(1, count):
            cur = take()
            yield from wait_full(k_full, k_empty, cur)
            yield from wait_full(v_full, v_empty, prev)
            assert k_data[cur["slot"]] == cur["tile"], ("K", b, j, cur, k_data[cur["slot"]])
            assert v_data[prev["slot"]] == prev["tile"], ("V", b, j, prev, v_data[prev["slot"]])
            yield from pause()
            release(k_empty, cur)
            yield from pause()
            assert v_data[prev["slot"]] == prev["tile"], ("V overwritten", b, j)
            release(v_empty, prev)
            prev = cur
        yield from wait_full(v_full, v_empty, prev)
        assert v_data[prev["slot"]] == prev["tile"], ("V", b, count, prev)
        release(v_empty, prev)

    procs = [producer(), consumer(False)] + ([consumer(True)] if cb else [])
    alive = [True] * len(procs)
    for _ in range(1000000):
        if not any(alive) and not in_flight:
            return
        for x in list(in_flight):  # TMA loads land
            if x[0] <= 0:
                in_flight.remove(x)
                full, data = (k_full, k_data) if x[1] == "k" else (v_full, v_data)
                data[x[2]] = x[3]
                full[x[2]].tx -= 1
                full[x[2]].settle()
            else:
                x[0] -= 1
        order = list(range(len(procs)))
        rnd.shuffle(order)
        for i in order:
            if alive[i] and rnd.random() < 0.7:
                try:
                    next(procs[i])
                except StopIteration:
                    alive[i] = False
    raise RuntimeError("deadlock: still running %s" % alive)


def random_pair(n, P, width, exempt, share, rnd):
    pool = list(range(P if exempt else 0, n))
    rnd.shuffle(pool)
    a = sorted((list(range(P)) if exempt else []) + pool[: width - (P if exempt else 0)])
    pick = [t for t in a if (exempt and t < P) or rnd.random() < share]
    rest = [t for t in range(P if exempt else 0, n) if t not in pick]
    rnd.shuffle(rest)
    return a, sorted(pick + rest[: width - len(pick)])


def main():
    args = [x for x in sys.argv[1:] if not x.startswith("--")]
    empty_wait = "--no-empty-wait" not in sys.argv
    cases = int(args[0]) if args else 3000
    rnd = random.Random(int(args[1]) if len(args) > 1 else 1)
    for it in range(cases):
        n = rnd.randint(2, 30)
        P = rnd.randint(0, n - 1)
        exempt = rnd.random() < 0.6
        width = P + rnd.randint(1, n - P) if exempt else rnd.randint(1, n)
        a, b = random_pair(n, P, width, exempt, rnd.choice([0, 0.3, 0.7, 1.0]), rnd)
        if rnd.random() < 0.3:
            a[rnd.randrange(width)] = -1  # out of range (the kernel loads tile 0 and masks it)
        if rnd.random() < 0.3:
            b[rnd.randrange(width)] = n + 5
        stages = rnd.choice([2, 3, 4, 6])
        mode = rnd.random()
        try:
            if mode < 0.15:
                run(list(range(n)), list(range(n)), True, stages, it, empty_wait)  # a prefix pair
            elif mode < 0.25:
                run(a, None, False, stages, it, empty_wait)  # a tile alone
            else:
                run(a, b, False, stages, it, empty_wait)
        except (AssertionError, RuntimeError) as e:
            print("case %d (stages %d): %s" % (it, stages, e))
            return 1
    print("ok: %d cases" % cases)
    return 0


if __name__ == "__main__":
    sys.exit(main())
