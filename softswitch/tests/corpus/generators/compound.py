# Writes compound.stf: each expected result computed here with Python's big integers, reduced
# as the P4_16 specification says (independently of softswitch).
# Run: python3 generators/compound.py > compound.stf
def wrap(v, w): return v % (1 << w)
def sat(v, w, signed):
    lo, hi = (-(1 << (w - 1)), (1 << (w - 1)) - 1) if signed else (0, (1 << w) - 1)
    return wrap(max(lo, min(hi, v)), w)
def sval(v, w): return v - (1 << w) if v >> (w - 1) else v

print("# Compound assignment results checked against a big-integer reference (generators/compound.py).")
for a, b, s, shift in [(200, 100, -100, 1), (3, 5, 127, 2), (0, 255, -1, 7), (255, 1, -128, 3), (17, 17, 5, 12)]:
    sh = shift & 7
    sb = sval(b, 8)
    res = [a + b, a - b, a * b, a & b, a | b, a ^ b, a << sh, a >> sh,
           sat(a + b, 8, False), sat(a - b, 8, False),
           s >> sh, sat(s + sb, 8, True), sat(s - sb, 8, True),
           (wrap((a >> 4) + (b & 15), 4) << 4) | (a & 15)]
    op = bytes([a, b, wrap(s, 8), shift])
    print(f"packet 0 {op.hex()} 0102")
    print(f"expect 1 {op.hex()} {bytes(wrap(v, 8) for v in res).hex()} 0102 $")
