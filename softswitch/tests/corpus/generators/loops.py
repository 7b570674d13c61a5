# Writes loops.stf: each expected result computed here by running the loops of loops.p4 in
# Python, with P4's bit<W> wrap-around (independently of softswitch).
# Run: python3 generators/loops.py > loops.stf
def w(v, bits): return v % (1 << bits)

def expected(n, skip, stop, x):
    s = c = 0
    for i in range(n):
        if i == skip: continue
        if i == stop: break
        s, c = w(s + i, 8), w(c + 1, 8)
    p, k = 1, 1
    while k <= x and k <= 8:
        p, k = w(p * k, 16), k + 1
    acc = 0
    for a in range(1, 4):
        for b in range(a):
            if b == 2: break
            acc = w(acc + a * b + x, 8)
    down = w(n + 1, 8)
    none = 7  # the loop from x while z < x runs no iteration
    return bytes([s, c]) + p.to_bytes(2, "big") + bytes([acc, down, none])

print("# Loop results checked against Python's loops (generators/loops.py).")
for n, skip, stop, x in [(0, 9, 9, 0), (5, 9, 9, 3), (10, 2, 7, 8), (255, 100, 255, 200), (20, 0, 3, 12)]:
    inp = bytes([n, skip, stop, x])
    print(f"packet 0 {inp.hex()} 0102")
    print(f"expect 1 {inp.hex()} {expected(n, skip, stop, x).hex()} 0102 $")
