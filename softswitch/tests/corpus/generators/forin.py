# Writes forin.stf: each expected result computed here by running the loops of forin.p4 in
# Python, with P4's bit<8> wrap-around (independently of softswitch).
# Run: python3 generators/forin.py > forin.stf
def w(v): return v % 256

def expected(items):
    """items: the values the parser extracts (it stops after a 0, or after four)."""
    total = w(sum(items))
    lst = 0
    for x in [1, 2, 40, 3]:
        if x > items[0]: break
        lst = w(lst + x)
    rng = range(items[0], 256)
    apply_loop = w(2 * min(items[0], 10))
    return bytes([total, len(items), lst, w(len(rng)), rng[-1], apply_loop])

print("# for-in results checked against Python's loops (generators/forin.py).")
for items in [[0], [5, 0], [1, 2, 3, 4], [255, 7, 0], [40, 1, 1, 0]]:
    wire = bytes(items).hex()
    print(f"packet 0 {wire} 0102")
    print(f"expect 1 {wire} {expected(items).hex()} 0102 $")
