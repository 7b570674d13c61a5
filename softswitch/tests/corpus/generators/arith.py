# Writes arith.stf: each expected result computed here with Python's big integers, reduced as
# the P4_16 specification says (independently of softswitch). Run: python3 generators/arith.py > arith.stf
def wrap(v, w): return v % (1 << w)
def sat(v, w, signed):
    lo, hi = (-(1 << (w - 1)), (1 << (w - 1)) - 1) if signed else (0, (1 << w) - 1)
    return wrap(max(lo, min(hi, v)), w)
def sval(v, w): return v - (1 << w) if v >> (w - 1) else v

def bits(fields):
    acc, n = 0, 0
    for v, w in fields:
        acc = (acc << w) | wrap(v, w); n += w
    assert n % 8 == 0
    return acc.to_bytes(n // 8, "big").hex()

print("# Arithmetic results checked against a big-integer reference (generators/arith.py).")
for a, b, s, kind in [(200, 100, -100, 1), (3, 5, 127, 2), (0, 0, -1, 3), (255, 1, -128, 7), (17, 17, 5, 9)]:
    op = [(a, 8), (b, 8), (s, 8), (kind, 8)]
    tmp = {1: 10, 2: 20, 3: 20}.get(kind, 30) + (1 if kind == 7 else 0) + 100
    flags = (int(a < b) << 2) | (int(a == b) << 1) | int(s < 0)
    res = [(a + b, 8), (a - b, 8), (sat(a + b, 8, False), 8), (sat(a - b, 8, False), 8), (a * b, 8),
           (a << 3, 8), (a >> 3, 8), (s >> 2, 8), ((a << 8) | b, 16), (a >> 4, 4), (a, 12), (s, 12),
           (flags, 8), (sat(s + 100, 8, True), 8), (max(a, b), 8), (tmp, 8), (-a, 8), (~a, 8), (0, 4)]
    print(f"packet 0 {bits(op)} 0102")
    print(f"expect 1 {bits(op)} {bits(res)} 0102 $")
print("# kind 0xff: dropped in ingress, then exit.")
print(f"packet 0 {bits([(1, 8), (2, 8), (3, 8), (255, 8)])}")
