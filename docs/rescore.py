#!/usr/bin/env python3
"""rescore.py - recompute a bracket record's score from its raw samples, without bracket.

Usage: python3 docs/rescore.py [--quiet] [--rtol X] RECORD...

RECORD is a run folder (DIR/<run-id>) or its record.json; samples.msgpack is read from
beside it. Python 3 standard library only: msgpack is decoded here.

Recomputed, as `bracket score` does (docs/record.md, "Recomputing the score"): each timed
arm's summary (n, median_ns, cost_ns, cost_interval_ns), the score object (baseline,
bp_excluded, speedup, speedup_interval, baseline_cost_ns, drift, drift_exceeded,
thresholds), verdict, status and reasons; an unfinished record (`unfinished` true, the
provisional one a run writes before each arm: docs/record.md, "Unfinished runs") is checked
against its arms (none failed, none ran from the arm its `stopped` names on) and its
reasons marked as the run marks them. Every difference from the record is printed as
`RUN: PATH: record X, recomputed Y`. Numbers are compared exactly unless --rtol allows a
relative difference (for a Python whose libm log differs from the one the record was made
with). Each arm's ok is judged again from its processes, as `bracket score` judges it (exit
codes, signals, statuses, sample counts, routing), and an ok that says otherwise is a
difference. Not recomputed: quality (its state and reason are taken from the record), the
arms' reason (taken from the record), algbw / busbw, the digests (samples.digest is checked
and a mismatch reported as a difference).

Exit: 0 every record agrees, 1 some differ, 2 a record could not be read or holds an input
the scorer refuses (bracket refuses it too). It checks the score's arithmetic, not the
record's integrity: forms it does not read, `stopped` against the arms and the arms'
`audit` marks go unchecked (docs/record.md, "Recomputing the score"); `bracket score`
checks them.
"""
import hashlib
import json
import math
import os
import re
import struct
import sys

MASK = (1 << 64) - 1
ARMS = ("B", "C", "B'")          # timed arms, index 0..2 in record.json's arms[]
REASONS_LEN = 1024               # BK_SCORE_REASONS_LEN (reasons hold at most 1023 bytes)
REASON_LEN = 256                 # BK_SCORE_REASON_LEN (an arm's / quality's reason)
PROBLEM_LEN = REASON_LEN + 64    # "arm B' failed: " before a reason
MAX_ROUNDS = 16


class Unreadable(Exception):
    pass


# ---- msgpack: the subset samples.msgpack uses (maps, str, unsigned ints, arrays), and the
# ---- other scalar types for robustness ----

def _unpack(b, i):
    """One msgpack object at b[i:]; returns (object, next offset)."""
    t = b[i]
    if t <= 0x7f:
        return t, i + 1
    if 0x80 <= t <= 0x8f:
        return _map(b, i + 1, t & 0x0f)
    if 0x90 <= t <= 0x9f:
        return _array(b, i + 1, t & 0x0f)
    if 0xa0 <= t <= 0xbf:
        n = t & 0x1f
        return b[i + 1:i + 1 + n].decode("utf-8"), i + 1 + n
    if t >= 0xe0:
        return t - 0x100, i + 1
    if t == 0xc0:
        return None, i + 1
    if t in (0xc2, 0xc3):
        return t == 0xc3, i + 1
    if t in (0xcc, 0xcd, 0xce, 0xcf, 0xd0, 0xd1, 0xd2, 0xd3, 0xca, 0xcb):
        fmt, w = {0xcc: (">B", 1), 0xcd: (">H", 2), 0xce: (">I", 4), 0xcf: (">Q", 8),
                  0xd0: (">b", 1), 0xd1: (">h", 2), 0xd2: (">i", 4), 0xd3: (">q", 8),
                  0xca: (">f", 4), 0xcb: (">d", 8)}[t]
        return struct.unpack_from(fmt, b, i + 1)[0], i + 1 + w
    if t in (0xd9, 0xda, 0xdb, 0xc4, 0xc5, 0xc6):
        fmt, w = {0xd9: (">B", 1), 0xda: (">H", 2), 0xdb: (">I", 4),
                  0xc4: (">B", 1), 0xc5: (">H", 2), 0xc6: (">I", 4)}[t]
        n = struct.unpack_from(fmt, b, i + 1)[0]
        j = i + 1 + w
        raw = b[j:j + n]
        if len(raw) != n:
            raise Unreadable("msgpack: cut short at byte %d" % i)
        return (raw.decode("utf-8") if t >= 0xd9 else raw), j + n
    if t in (0xdc, 0xdd):
        n = struct.unpack_from(">H" if t == 0xdc else ">I", b, i + 1)[0]
        return _array(b, i + (3 if t == 0xdc else 5), n)
    if t in (0xde, 0xdf):
        n = struct.unpack_from(">H" if t == 0xde else ">I", b, i + 1)[0]
        return _map(b, i + (3 if t == 0xde else 5), n)
    raise Unreadable("msgpack: type byte 0x%02x at byte %d is not supported" % (t, i))


def _array(b, i, n):
    out = []
    app = out.append
    unpack_from = struct.unpack_from
    for _ in range(n):  # the common case inline: unsigned integers (the samples)
        t = b[i]
        if t <= 0x7f:
            app(t)
            i += 1
        elif t == 0xce:
            app(unpack_from(">I", b, i + 1)[0])
            i += 5
        elif t == 0xcd:
            app(unpack_from(">H", b, i + 1)[0])
            i += 3
        elif t == 0xcc:
            app(b[i + 1])
            i += 2
        elif t == 0xcf:
            app(unpack_from(">Q", b, i + 1)[0])
            i += 9
        else:
            v, i = _unpack(b, i)
            app(v)
    return out, i


def _map(b, i, n):
    out = {}
    for _ in range(n):
        k, i = _unpack(b, i)
        v, i = _unpack(b, i)
        out[k] = v
    return out, i


def msgpack_stream(b):
    """Every object of a back-to-back msgpack stream."""
    i, out = 0, []
    try:
        while i < len(b):
            v, i = _unpack(b, i)
            out.append(v)
    except (IndexError, struct.error) as e:
        raise Unreadable("msgpack: cut short or malformed near byte %d (%s)" % (i, e))
    return out


# ---- the RNG: xoshiro256** seeded by splitmix64; normal, gamma, beta (runner/rng.c) ----

class Rng:
    def __init__(self, seed):
        x = seed & MASK
        s = []
        for _ in range(4):
            x = (x + 0x9e3779b97f4a7c15) & MASK
            z = x
            z = ((z ^ (z >> 30)) * 0xbf58476d1ce4e5b9) & MASK
            z = ((z ^ (z >> 27)) * 0x94d049bb133111eb) & MASK
            s.append(z ^ (z >> 31))
        self.s = s

    def next(self):
        s0, s1, s2, s3 = self.s
        t1 = (s1 * 5) & MASK
        result = ((((t1 << 7) | (t1 >> 57)) & MASK) * 9) & MASK
        t = (s1 << 17) & MASK
        s2 ^= s0
        s3 ^= s1
        s1 ^= s2
        s0 ^= s3
        s2 ^= t
        s3 = ((s3 << 45) | (s3 >> 19)) & MASK
        self.s = [s0, s1, s2, s3]
        return result

    def uniform(self):  # [0, 1): the top 53 bits times 2^-53 (exact)
        return (self.next() >> 11) * (1.0 / 9007199254740992.0)

    def normal(self):  # Marsaglia's polar method; the second variate is dropped
        while True:
            u = 2.0 * self.uniform() - 1.0
            v = 2.0 * self.uniform() - 1.0
            q = u * u + v * v
            if not (q >= 1.0 or q == 0.0):
                break
        return u * math.sqrt(-2.0 * math.log(q) / q)

    def gamma(self, shape):  # Marsaglia-Tsang
        if not (shape > 0.0) or not math.isfinite(shape):
            return math.nan
        if shape < 1.0:
            g = self.gamma(shape + 1.0)
            u = 1.0 - self.uniform()
            return g * math.pow(u, 1.0 / shape)
        d = shape - 1.0 / 3.0
        c = 1.0 / math.sqrt(9.0 * d)
        while True:
            x = self.normal()
            v = 1.0 + c * x
            if v <= 0.0:
                continue
            v = v * v * v
            u = 1.0 - self.uniform()
            x2 = x * x
            if u < 1.0 - 0.0331 * x2 * x2:
                return d * v
            if math.log(u) < 0.5 * x2 + d * (1.0 - v + math.log(v)):
                return d * v

    def beta(self, a, b):
        x = self.gamma(a)
        y = self.gamma(b)
        s = x + y
        if s <= 0.0:
            return 1.0 if self.uniform() < a / (a + b) else 0.0
        return x / s


# ---- the scorer (runner/score.c) ----

def lower_median(v):
    return v[(len(v) - 1) // 2]


def draw_median(rng, v):
    n = len(v)
    m = (n - 1) // 2 + 1
    u = rng.beta(float(m), float(n - m + 1))
    idx = int(float(n) * u)
    return v[min(idx, n - 1)]


def shape_stat(rounds, rng=None, pick=None):
    """rounds: the shape's sorted rounds (lists). One round: its lower median; k rounds: the
    mean of the picked rounds' lower medians (drawn, with an rng)."""
    k = len(rounds)
    if k == 1:
        return float(draw_median(rng, rounds[0]) if rng else lower_median(rounds[0]))
    total = 0.0
    for j in range(k):
        v = rounds[pick[j] if rng else j]
        total += float(draw_median(rng, v) if rng else lower_median(v))
    return total / k


def point_cost(sets, w):
    cost = 0.0
    for s, rounds in enumerate(sets):
        cost += w[s] * shape_stat(rounds)
    return cost


def draw_cost(rng, sets, w):
    k = len(sets[0])
    pick = []
    if k > 1:
        for _ in range(k):
            r = int(float(k) * rng.uniform())
            pick.append(r if r < k else k - 1)
    cost = 0.0
    for s, rounds in enumerate(sets):
        cost += w[s] * shape_stat(rounds, rng, pick)
    return cost


def percentile_interval(rep, confidence):
    rep = sorted(rep)
    R = len(rep)
    a2 = (1.0 - confidence) / 2.0
    ilo = math.floor(a2 * (R - 1) + 1e-9)
    ihi = math.ceil((1.0 - a2) * (R - 1) - 1e-9)
    return rep[max(ilo, 0)], rep[min(ihi, R - 1)]


def min_iters(confidence):
    n = 1
    while n < 60 and 2.0 * math.ldexp(1.0, -n) > 1.0 - confidence:
        n += 1
    return n


def cfmt(fmt, *args):
    """C printf for the conversions the reasons use (%s %d %zu %g %.4f %+.2f %%)."""
    return (fmt.replace("%zu", "%d") % args).encode("utf-8", "surrogateescape")


def cut(b, size):  # what a C buffer of `size` bytes keeps (snprintf, strlcpy)
    return b[:size - 1]


CUT_BYTES = False  # records before 2026-12-04 cut reasons where the bytes ran out


def cut_words(b, size):  # bk_strlcpy_words: cut after a whole word, ending in "..."
    if len(b) < size or CUT_BYTES:
        return cut(b, size)
    if size <= 4:
        return b"..."[:size - 1]
    keep = c = size - 4
    while c > 0 and b[c] != 0x20:
        c -= 1
    if c == 0:  # one word longer than the buffer: cut between UTF-8 characters
        c = keep
        while c > 0 and (b[c] & 0xC0) == 0x80:
            c -= 1
    while c > 0 and b[c - 1] in b" ;,:":
        c -= 1
    return b[:c] + b"..."


class Reasons:
    def __init__(self):
        self.b = b""

    def add(self, text):  # add_reason: "; "-joined, cut by words at 1023 bytes
        if len(self.b) + 3 >= REASONS_LEN:
            return
        if self.b:
            self.b += b"; "
        self.b += cut_words(text, REASONS_LEN - len(self.b))


def score(inp):
    """bk_score_compute. inp: dict with nshapes, weights, arms (3 dicts: present, failed,
    reason (bytes), rounds, cp (per shape, the critical path, rounds one after another)),
    quality, quality_reason (bytes), confidence, min_gain, drift_limit, drift_policy,
    resamples, seed, bc_only. Returns a dict (see below) or raises ValueError for an input
    that breaks the scorer's contract."""
    ns, w, R = inp["nshapes"], inp["weights"], inp["resamples"]
    arms = inp["arms"]
    conf = inp["confidence"]
    total = 0.0
    for s, x in enumerate(w):
        if not (x >= 0.0) or not math.isfinite(x):
            raise ValueError("score: weight of shape %d is %r" % (s, x))
        total += x
    if abs(total - 1.0) > 1e-6:
        raise ValueError("score: shape weights sum to %.9g, not 1" % total)
    if not (0.0 < conf < 1.0) or R < 1:
        raise ValueError("score: confidence %r or bootstrap resamples %d out of range"
                         % (conf, R))
    for key in ("min_gain", "drift_limit"):
        if not (inp[key] >= 0.0) or not math.isfinite(inp[key]):
            raise ValueError("score: %s %r (need >= 0)" % (key, inp[key]))
    if inp["drift_policy"] not in ("exclude_later", "strict"):
        raise ValueError("score: unknown drift policy %r" % inp["drift_policy"])
    for a, arm in enumerate(arms):
        k = max(arm["rounds"], 1)
        if arm["rounds"] < 0 or arm["rounds"] > MAX_ROUNDS:
            raise ValueError("score: arm %s has %d rounds" % (ARMS[a], arm["rounds"]))
        if arm["present"] and not arm["failed"]:
            for s in range(ns):
                if len(arm["cp"][s]) % k:
                    raise ValueError("score: arm %s shape %d: not %d rounds of one length"
                                     % (ARMS[a], s, k))
    if arms[0]["present"] and arms[2]["present"] and not arms[0]["failed"] and \
            not arms[2]["failed"] and max(arms[0]["rounds"], 1) != max(arms[2]["rounds"], 1):
        raise ValueError("score: arms B and B' have %d and %d rounds (pooled round by round, "
                         "they must match)"
                         % (max(arms[0]["rounds"], 1), max(arms[2]["rounds"], 1)))

    out = {"arms": [None, None, None]}
    problem = [b"", b"", b""]
    smp = [None] * 4    # per set: per shape, list of sorted rounds
    cost = [0.0] * 4
    have = [False] * 4
    for a, arm in enumerate(arms):
        if a == 2 and inp["bc_only"]:
            continue
        name = ARMS[a]
        if not arm["present"]:
            problem[a] = cut(cfmt("arm %s missing", name), PROBLEM_LEN)
            continue
        if arm["failed"]:
            why = arm["reason"].decode("utf-8", "surrogateescape") or "no reason given"
            problem[a] = cut(cfmt("arm %s failed: %s", name, why), PROBLEM_LEN)
            continue
        empty = [s for s in range(ns) if len(arm["cp"][s]) == 0]
        if empty:
            problem[a] = cut(cfmt("arm %s has no timed iterations for shape %d", name, empty[0]),
                             PROBLEM_LEN)
            continue
        k = max(arm["rounds"], 1)
        sets = []
        for s in range(ns):
            v, ln = arm["cp"][s], len(arm["cp"][s]) // k
            sets.append([sorted(v[j * ln:(j + 1) * ln]) for j in range(k)])
        smp[a] = sets
        cost[a] = point_cost(sets, w)
        if not cost[a] > 0.0:
            problem[a] = cut(cfmt("arm %s has zero cost (all medians 0 ns)", name), PROBLEM_LEN)
            continue
        have[a] = True
    have[3] = not inp["bc_only"] and have[0] and have[2]
    if have[3]:  # round j of the pool: round j of B merged with round j of B'
        smp[3] = [[sorted(rb + rp) for rb, rp in zip(smp[0][s], smp[2][s])] for s in range(ns)]
        cost[3] = point_cost(smp[3], w)

    have_drift = have[0] and have[2]
    drift = cost[2] / cost[0] - 1.0 if have_drift else 0.0
    drift_exceeded = have_drift and abs(drift) > inp["drift_limit"]
    bp_excluded = drift_exceeded and inp["drift_policy"] == "exclude_later"
    base = 3 if have[3] and not bp_excluded else 0 if have[0] else -1

    rep = [[] if have[k] else None for k in range(4)]
    srep = [] if base >= 0 and have[1] else None
    rng = Rng(inp["seed"])
    for _ in range(R):
        for k in range(4):
            if have[k]:
                rep[k].append(draw_cost(rng, smp[k], w))
        if srep is not None:
            srep.append(rep[base][-1] / rep[1][-1])

    for a in range(3):
        if have[a]:
            lo, hi = percentile_interval(rep[a], conf)
            out["arms"][a] = {
                "n": [sum(len(r) for r in smp[a][s]) for s in range(ns)],
                "median_ns": [shape_stat(smp[a][s]) for s in range(ns)],
                "cost_ns": cost[a],
                "cost_interval_ns": [lo, hi],
            }
    sc = {"baseline": "B+B'" if base == 3 else "B" if base == 0 else "",
          "bp_excluded": bp_excluded}
    speedup = lo = hi = None
    if srep is not None:
        speedup = cost[base] / cost[1]
        lo, hi = percentile_interval(srep, conf)
        sc["speedup"] = speedup
        sc["speedup_interval"] = [lo, hi]
    if base >= 0:
        sc["baseline_cost_ns"] = cost[base]
    if have_drift:
        sc["drift"] = drift
        sc["drift_exceeded"] = drift_exceeded
    sc["thresholds"] = {"confidence": conf, "min_gain": inp["min_gain"],
                        "drift_limit": inp["drift_limit"], "drift_policy": inp["drift_policy"],
                        "bootstrap_resamples": R, "bc_only": inp["bc_only"],
                        # written as a signed 64-bit JSON integer (json_int_t)
                        "seed": inp["seed"] - (1 << 64) if inp["seed"] >> 63 else inp["seed"]}
    out["score"] = sc

    # decide (precedence and reasons as runner/score.c decide())
    bar = 1.0 + inp["min_gain"]
    rs = Reasons()
    verdict, blocked, decided = "NO_DECISION", False, False
    q, qr = inp["quality"], inp["quality_reason"].decode("utf-8", "surrogateescape")
    if q == "fail":
        verdict, decided = "FAIL", True
        rs.add(cfmt("quality failed: %s", qr or "audit A differs from reference T beyond "
                    "tolerance"))
    for a in range(3):
        if problem[a]:
            blocked = True
            rs.add(problem[a])
    if q == "missing":
        blocked = True
        rs.add(cfmt("quality evidence missing: %s", qr or "audit A or reference T produced "
                    "no result"))
    elif q == "not_run" and not inp["bc_only"]:
        blocked = True
        rs.add(cfmt("quality not run (audit A against reference T)"))
    need = min_iters(conf)
    for a, arm in enumerate(arms):
        if (a == 2 and inp["bc_only"]) or not arm["present"] or arm["failed"]:
            continue
        few = None
        for s in range(ns):
            per = len(arm["cp"][s]) // max(arm["rounds"], 1)
            if per < need:
                few = cut(cfmt("too few timed iterations to decide: arm %s has %zu a round at "
                               "shape %d, and an interval of a median at confidence %g needs "
                               "at least %d (raise workload.iters)", ARMS[a], per, s, conf,
                               need), PROBLEM_LEN)
                break
        if few:
            blocked = True
            rs.add(few)
            break
    if drift_exceeded and inp["drift_policy"] == "strict":
        blocked = True
        rs.add(cfmt("drift %+.2f%% exceeds the %.2f%% limit (policy strict)", 100.0 * drift,
                    100.0 * inp["drift_limit"]))
    if not decided and not blocked and speedup is not None:
        if lo > bar:
            verdict = "PASS"
            rs.add(cfmt("speed-up %.4f [%.4f, %.4f] clears 1+min_gain = %.4f",
                        speedup, lo, hi, bar))
        elif hi < bar:
            verdict = "FAIL"
            rs.add(cfmt("slower or no material gain: speed-up %.4f [%.4f, %.4f] below "
                        "1+min_gain = %.4f", speedup, lo, hi, bar))
        else:
            rs.add(cfmt("interval straddles 1+min_gain: speed-up %.4f [%.4f, %.4f] against "
                        "%.4f", speedup, lo, hi, bar))
    elif not decided and not blocked:
        rs.add(cfmt("no speed-up could be computed"))
    elif speedup is not None:
        rs.add(cfmt("speed-up %.4f [%.4f, %.4f] (not decisive)", speedup, lo, hi))
    if bp_excluded:
        rs.add(cfmt("drift %+.2f%% exceeds the %.2f%% limit: B' kept in the record and "
                    "excluded, decided from B vs C", 100.0 * drift, 100.0 * inp["drift_limit"]))
    out["verdict"] = verdict
    out["reasons"] = rs.b
    return out


# ---- from the record to the scorer's input (runner/evaluate.c), termination ----

def critical_path(ranks, cap):
    """Per iteration the slowest lane rank; (values, incomplete)."""
    counts = [min(len(r), cap) for r in ranks]
    m = min(counts)
    if len(ranks) == 1:
        return list(ranks[0][:m]), False
    return list(map(max, *(r[:m] for r in ranks))), len(set(counts)) > 1


def terminated_name(text):
    """NAME of "[round k of R: ]terminated by NAME during arm X ..." / "... before ...";
    None when text is not such a reason (runner/run.c terminated_name)."""
    m = re.match(r"round\s*[+-]?\d+\s*of\s*[+-]?\d+:\s*", text)
    if m:
        text = text[m.end():]
    pre = "terminated by "
    if not text.startswith(pre):
        return None
    n = text[len(pre):]
    end, before = n.find(" during arm "), n.find(" before ")
    if end < 0 or (before >= 0 and before < end):
        end = before
    if end <= 0:
        return None
    return n[:end].encode("utf-8", "surrogateescape")[:31].decode("utf-8", "surrogateescape")


def c_string(text, size):  # a record's string as bracket holds it: a char[size]
    return text.encode("utf-8")[:size - 1].decode("utf-8", "ignore")


def run_terminated(rec):
    arms = rec["arms"]
    for idx in (0, 1, 2, 3, 4):
        a = arms[idx]
        if a.get("ran") and not a.get("ok"):
            name = terminated_name(c_string(a.get("reason", ""), 1024))
            if name is not None:
                return name
    stopped = c_string(rec.get("stopped", ""), 256)
    if " before arm " in stopped:
        return terminated_name(stopped)
    return None


ALL_ARMS = ("B", "C", "B'", "A", "T")  # record.json's arms[], in run order


def unfinished_stopped(idx):  # bk_run_stopped_unfinished
    return "unfinished: written before arm %s; the run did not replace it" % ALL_ARMS[idx]


def unfinished_arm(stopped):  # bk_run_unfinished_arm: the arm's index, or None
    for idx in range(len(ALL_ARMS)):
        if stopped == unfinished_stopped(idx):
            return idx
    return None


def record_unfinished(rec):
    """The record's `unfinished` (absent in records before 2026-12-04: false)."""
    u = rec.get("unfinished", False)
    if not isinstance(u, bool):
        raise Unreadable("unfinished: must be true or false (or absent, as in records before "
                         "2026-12-04), the record has %s" % json.dumps(u))
    return u


def v7_decided(rec, blocks):  # bk_run_v7_decided: B and C alone decide, quality not yet known
    inp = score_input(rec, blocks)
    inp.update(bc_only=True, quality="not_run", quality_reason=b"")
    return score(inp)["verdict"] != "NO_DECISION"


def unfinished_problems(rec, blocks):
    """An unfinished record against its arms (runner/cmd_score.c check_unfinished): every arm
    before the one `stopped` names ended well, it and every later arm did not run (under v7
    a B' that B/C made unnecessary is passed over). Differences as check_once lists them."""
    arms, stopped = rec["arms"], rec.get("stopped", "")
    named = unfinished_arm(stopped)
    if not record_unfinished(rec):
        if named is not None:
            return [("unfinished", False, True, " (stopped says the record was written "
                     "before arm %s)" % ALL_ARMS[named])]
        return []
    first = None
    for idx, a in enumerate(arms[:len(ALL_ARMS)]):
        if first is None and a.get("ran") and not a.get("ok"):
            return [("unfinished", True, False, " (arm %s ran and failed)" % ALL_ARMS[idx])]
        if first is None and not a.get("ran") and not (
                idx == 2 and rec["plan"].get("protocol", {}).get("version", "v8") == "v7"
                and v7_decided(rec, blocks)):
            first = idx
        elif first is not None and a.get("ran"):
            return [("unfinished", True, False, " (arm %s ran after arm %s, which did not)"
                     % (ALL_ARMS[idx], ALL_ARMS[first]))]
    if first is None:
        return [("unfinished", True, False, " (every arm ran)")]
    if named is not None and arms[named].get("ran"):
        return [("unfinished", True, False, " (arm %s, before which stopped says it was "
                 "written, ran)" % ALL_ARMS[named])]
    if named != first:
        return [("stopped", stopped, unfinished_stopped(first), "")]
    return []


def process_failure(p, audit, want, routed):
    """What fails one process, as bk_run_judge_arm judges it (its checks, not its words), or
    None. want: the samples a timed process owes; routed: the shapes its engine must say it
    served with the incumbent, or None where the record's routing.shapes cannot say."""
    if not p.get("reported"):
        return "no report from its agent"
    if p.get("timed_out"):
        return "timed out"
    if p.get("signal") or p.get("killed"):
        return "ended by signal %d%s" % (p.get("signal", 0), ", killed" if p.get("killed") else "")
    if p.get("exit_code") != 0:
        return "exit %s" % p.get("exit_code")
    if not p.get("status_seen"):
        return "no final status received"
    if not p.get("status_ok"):
        return "its status says it failed"
    if not audit and (p.get("samples_received") != want or p.get("samples_sent") != want):
        return "samples: got %s, sent %s, expected %d" % (p.get("samples_received"),
                                                         p.get("samples_sent"), want)
    if routed is not None and "routed_shapes" in p and p["routed_shapes"] != routed:
        return "served shapes %s with the incumbent; the routing gives %s" % (
            p["routed_shapes"], routed)
    return None


def arm_problems(rec):
    """Each arm's `ok` judged again from its processes, as `bracket score` judges it
    (check_arms): every process of every round ended well, with all its samples (timed) and
    the routing the record's routing.shapes gives; one (JSON path, record, recomputed, note)
    for each arm whose `ok` says otherwise."""
    plan = rec["plan"]
    wl = plan["workload"]
    want = wl["iters"] * len(wl["shapes"])
    cand, inc = plan["candidate"]["variant"], plan["incumbent"]["variant"]
    rs = rec.get("routing", {}).get("shapes") if isinstance(rec.get("routing"), dict) else None
    cand_routed = None  # the shapes the run's catalog gave the incumbent in C and A
    if isinstance(rs, list) and len(rs) == len(wl["shapes"]) and all(
            isinstance(x, dict) and isinstance(x.get("served_by"), str) for x in rs):
        cand_routed = [i for i, x in enumerate(rs) if x["served_by"] != cand and i < 64]
    out = []
    for idx, a in enumerate(rec["arms"]):
        if not a.get("ran"):
            continue
        routed = None
        if cand_routed is not None:
            routed = cand_routed if a.get("variant") == cand and cand != inc else []
        world = len(a["lane"])
        why = None
        for r, p in enumerate(a["processes"][:int(a.get("rounds", 1)) * world]):
            f = process_failure(p, a.get("audit"), want, routed)
            if f is not None:
                why = "round %d lane rank %d: %s" % (r // world + 1, r % world, f)
                break
        judged = why is None
        if bool(a.get("ok")) != judged:
            out.append(("arms[%d].ok" % idx, a.get("ok", _MISSING), judged,
                        " (its processes: %s)" % (why or "every one ended well")))
    return out


def weights(shapes):
    """The plan's weights as the loader takes them (plans/plan_check.c): relative, each
    divided by their sum (summed in shape order, one addition at a time as C does: not
    sum(), which compensates from Python 3.12); the record keeps them as written."""
    w = [float(s["weight"]) for s in shapes]
    total = 0.0
    for x in w:
        total += x
    return [x / total for x in w]


def score_input(rec, blocks):
    plan = rec["plan"]
    wl, pr = plan["workload"], plan.get("protocol", {})
    ns, iters = len(wl["shapes"]), wl["iters"]
    arms_rec = rec["arms"]
    inp = {
        "nshapes": ns,
        "weights": weights(wl["shapes"]),
        "confidence": float(pr.get("confidence", 0.95)),
        "min_gain": float(pr.get("min_gain", 0.01)),
        "drift_limit": float(pr.get("drift_limit", 0.02)),
        "drift_policy": pr.get("drift_policy", "exclude_later"),
        "resamples": int(pr.get("bootstrap_resamples", 2000)),
        "seed": int(wl.get("seed", 1)) & MASK,
        "quality": rec["quality"]["state"],
        "quality_reason": cut_words(rec["quality"].get("reason", "").encode("utf-8"),
                                    REASON_LEN),
        "arms": [],
    }
    ran_ok = [a.get("ran", False) and a.get("ok", False) for a in arms_rec]
    inp["bc_only"] = (pr.get("version", "v8") == "v7" and not arms_rec[2].get("ran", False)
                      and ran_ok[0] and ran_ok[1])
    for k, name in enumerate(ARMS):
        a = arms_rec[k]
        arm = {"present": bool(a.get("ran")), "failed": False, "reason": b"", "rounds": 0,
               "cp": [[] for _ in range(ns)]}
        inp["arms"].append(arm)
        if not arm["present"]:
            continue
        if not a.get("ok"):
            arm["failed"] = True
            why = cut(a.get("reason", "").encode("utf-8"), 1024)  # the arm's reason[1024]
            arm["reason"] = cut_words(why or b"arm failed", REASON_LEN)
            continue
        rounds = int(a.get("rounds", 1))
        world = len(a["lane"])
        arm["rounds"] = rounds
        for s in range(ns):
            for j in range(rounds):
                ranks = [blocks.get((name, j + 1, r, s), []) for r in range(world)]
                cp, incomplete = critical_path(ranks, iters)
                arm["cp"][s] += cp
                if incomplete or not cp or (rounds > 1 and len(cp) != iters):
                    arm["failed"] = True
                    arm["reason"] = cfmt("arm %s round %d shape %d: ranks' samples incomplete",
                                         name, j + 1, s) if rounds > 1 else \
                        cfmt("arm %s shape %d: ranks' samples incomplete", name, s)
    return inp


def rescore(rec, raw):
    """The recomputed verdict, status, reasons (str), score and summaries (arms: one dict or
    None per timed arm) of a record (a dict) and its samples.msgpack (bytes)."""
    objs = msgpack_stream(raw)
    if not objs or not isinstance(objs[0], dict) or objs[0].get("schema") != "bracket.samples/1":
        raise Unreadable("samples.msgpack: no bracket.samples/1 header")
    blocks = {}
    for b in objs[1:]:
        blocks[(b["arm"], b.get("round", 1), b["rank"], b["shape"])] = b["ns"]
    out = score(score_input(rec, blocks))
    out["problems"] = arm_problems(rec) + unfinished_problems(rec, blocks)
    name = run_terminated(rec)
    before = unfinished_arm(c_string(rec.get("stopped", ""), 256))
    why = None
    if name is not None:  # bk_terminate_mark_as
        why = ("terminated by " + name).encode("utf-8", "surrogateescape")
    elif record_unfinished(rec) and before is not None:  # bk_terminate_mark_unfinished
        why = ("unfinished: the run ended during or before arm %s without writing its final "
               "record" % ALL_ARMS[before]).encode("utf-8")
    if why is not None:
        if out["reasons"]:
            why += b"; " + out["reasons"]
        out["reasons"] = cut_words(why, REASONS_LEN)
        out["verdict"] = "NO_DECISION"
    out["status"] = {"PASS": "reproduction_pending", "FAIL": "failed"}.get(out["verdict"],
                                                                           "no_decision")
    out["reasons"] = out["reasons"].decode("utf-8", "replace")
    return out


# ---- comparison ----

def differences(want, got, at, rtol, diffs):
    """Every leaf where the recomputed `want` and the record's `got` differ, as (JSON path,
    record's value, recomputed value, note); _MISSING where one side has no such field."""
    if isinstance(want, dict) and isinstance(got, dict):
        for k in want:
            differences(want[k], got.get(k, _MISSING), "%s.%s" % (at, k), rtol, diffs)
        for k in got:
            if k not in want:
                diffs.append((at + "." + k, got[k], _MISSING, ""))
        return
    if isinstance(want, list) and isinstance(got, list) and len(want) == len(got):
        for i, (x, y) in enumerate(zip(want, got)):
            differences(x, y, "%s[%d]" % (at, i), rtol, diffs)
        return
    num = (int, float)
    if isinstance(want, num) and isinstance(got, num) and not isinstance(want, bool) \
            and not isinstance(got, bool):
        if want == got or (rtol > 0 and abs(want - got) <= rtol * abs(got)):
            return
        note = ""
        if isinstance(want, float) or isinstance(got, float):
            note = " (relative difference %.3g)" % (abs(want - got) / abs(got) if got
                                                    else math.inf)
        diffs.append((at, got, want, note))
        return
    if type(want) is type(got) and want == got:
        return
    diffs.append((at, got, want, ""))


_MISSING = object()


def check(path, rtol, quiet):
    global CUT_BYTES
    CUT_BYTES = False
    rc, out, err = check_once(path, rtol, quiet)
    if rc == 1:  # a record from before 2026-12-04 cut its reasons where the bytes ran out
        CUT_BYTES = True
        rc_old, out_old, err_old = check_once(path, rtol, quiet)
        CUT_BYTES = False
        if rc_old == 0:
            rc, out, err = 0, out_old, err_old
            if not quiet:
                out.append("%s: its reasons are cut where the bytes ran out, as records "
                           "written before 2026-12-04 cut them" % path)
    for line in out:
        print(line)
    for line in err:
        print(line, file=sys.stderr)
    return rc


def check_once(path, rtol, quiet):  # (rc, stdout lines, stderr lines)
    d = path if os.path.isdir(path) else os.path.dirname(path) or "."
    rp = os.path.join(d, "record.json") if os.path.isdir(path) else path
    try:
        with open(rp, encoding="utf-8") as f:
            rec = json.load(f)
        with open(os.path.join(d, "samples.msgpack"), "rb") as f:
            raw = f.read()
        got = rescore(rec, raw)
    except (OSError, ValueError, KeyError, TypeError, IndexError, Unreadable) as e:
        return 2, [], ["%s: cannot rescore: %s" % (path, e)]
    run = rec.get("run_id", path)
    diffs = []
    digest = "sha256:" + hashlib.sha256(raw).hexdigest()
    if rec.get("samples", {}).get("digest") != digest:
        diffs.append(("samples.digest", rec.get("samples", {}).get("digest", _MISSING), digest,
                      ""))
    diffs += got["problems"]
    for key in ("verdict", "status", "reasons"):
        differences(got[key], rec.get(key, _MISSING), key, 0.0, diffs)
    differences(got["score"], rec.get("score", _MISSING), "score", rtol, diffs)
    for a in range(3):
        have = rec["arms"][a].get("summary")
        want = got["arms"][a]
        at = "arms[%d].summary" % a
        if want is None:
            if have is not None:
                diffs.append((at, have, _MISSING, " (the arm is not costed)"))
            continue
        if have is None:
            diffs.append((at, _MISSING, want, ""))
            continue
        differences(want, {k: have.get(k, _MISSING) for k in want}, at, rtol, diffs)
    def show(v):
        return "(absent)" if v is _MISSING else json.dumps(v)
    out = ["%s: %s: record %s, recomputed %s%s" % (run, at, show(r), show(w), note)
           for at, r, w, note in diffs]
    if not diffs and not quiet:
        sc = got["score"]
        sp = ("speed-up %r [%r, %r]" % (sc["speedup"], *sc["speedup_interval"])
              if "speedup" in sc else "no speed-up")
        out.append("%s: identical: %s (%s), %s" % (run, got["verdict"], got["status"], sp))
        if record_unfinished(rec):
            out.append("%s: unfinished: written before arm %s; the run ended without replacing "
                       "it with its final record" % (run, ALL_ARMS[unfinished_arm(rec["stopped"])]))
    return (1 if diffs else 0), out, []


def main(argv):
    rtol, quiet, paths = 0.0, False, []
    args = iter(argv)
    for a in args:
        if a in ("-q", "--quiet"):
            quiet = True
        elif a == "--rtol":
            v = next(args, None)
            try:
                rtol = float(v)
            except (TypeError, ValueError):
                rtol = -1.0
            if not (0.0 <= rtol < math.inf):  # NaN too
                print("rescore.py: --rtol: want a relative tolerance, a number >= 0, got %s"
                      % ("nothing" if v is None else repr(v)), file=sys.stderr)
                return 2
        elif a in ("-h", "--help"):
            print(__doc__)
            return 0
        else:
            paths.append(a)
    if not paths:
        print("usage: rescore.py [--quiet] [--rtol X] RECORD...", file=sys.stderr)
        return 2
    rc = 0
    for p in paths:
        rc = max(rc, check(p, rtol, quiet))
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
