# Writes names.stf: each expected header computed here from names.p4's statements in Python
# (independently of softswitch). Run: python3 generators/names.py > names.stf
ENTRIES = {1: (10, 11), 2: (20, 21)}  # by_type's const entries: type -> (entries, actions)

def expected(f):
    typ, key, actions, entries, state, priority, apply_, lst = f
    if typ in ENTRIES:
        entries, actions = ENTRIES[typ]
    return bytes([typ, typ ^ key, actions, entries, state, (priority + 3) % 256,
                  (state + 1) % 256, min(lst + typ, 255)])

print("# Results checked against names.py's reading of names.p4 (generators/names.py).")
for f in [(1, 0x0f, 0, 0, 7, 1, 0, 0), (2, 0xff, 5, 6, 255, 254, 9, 250), (3, 3, 4, 5, 6, 7, 8, 9)]:
    print(f"packet 0 {bytes(f).hex()} 0102")
    print(f"expect 1 {expected(f).hex()} 0102 $")
