# Writes calls.stf: each expected header computed here from calls.p4's statements in Python
# (independently of softswitch). Run: python3 generators/calls.py > calls.stf
def expected(a, payload):
    hi, lo = a >> 4, a & 0xF
    short = 1 if len(payload) < 2 else 0  # lookahead<bit<16>> needs two bytes after h
    return bytes([a, (hi + hi) % 256, lo, 2, short]) + payload

print("# Results checked against calls.py's reading of calls.p4 (generators/calls.py).")
for a, payload in [(0x5A, b"\x01\x02"), (0xFF, b"\x01\x02\x03"), (0x3C, b"\x07"), (0x00, b"")]:
    wire = bytes([a, 0, 0, 0, 0]) + payload
    print(f"packet 0 {wire.hex()}")
    print(f"expect 1 {expected(a, payload).hex()} $")
