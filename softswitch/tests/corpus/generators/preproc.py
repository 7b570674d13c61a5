# Writes preproc.stf: the table entries, and each expected header computed here from
# preproc.p4's statements in Python (independently of softswitch).
# Run: python3 generators/preproc.py > preproc.stf
ENTRIES = {5: 0x42, 6: 0x99}  # fwd_table: in_a -> set_out(v)

print("# Results checked against preproc.py's reading of preproc.p4 (generators/preproc.py).")
for in_a, v in ENTRIES.items():
    print(f"add MyIngress.fwd_table hdr.h.in_a:{in_a} MyIngress.set_out(v:{v:#x})")
for in_a, in_b, out_a in [(5, 1, 0), (6, 250, 3), (7, 9, 8)]:
    packet = bytes([in_a, in_b, out_a, 0])
    expected = bytes([in_a, in_b, ENTRIES.get(in_a, out_a), (in_b + 7) % 256])
    print(f"packet 0 {packet.hex()} 0102")
    print(f"expect 1 {expected.hex()} 0102 $")
