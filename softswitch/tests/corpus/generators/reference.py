# Independent references the corpus generators (and dataplane-p4's STF generators) share,
# written here from their definitions and not taken from softswitch: the Internet checksum (RFC 1071), CRC-16/ARC, and the priorities of
# the entries a program gives a table.


def csum(b):
    """The Internet checksum of `b` (odd length padded with a zero byte)."""
    s = sum((b[i] << 8) | (b[i + 1] if i + 1 < len(b) else 0) for i in range(0, len(b), 2))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    return (~s) & 0xffff


def crc16_arc(data):
    """CRC-16/ARC (reflected polynomial 0xA001, initial value 0) of `data`."""
    crc = 0
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0xA001 if crc & 1 else crc >> 1
    return crc


def place(entries, largest_wins=True, delta=1):
    """The entries a program gives a table, each (priority = N or None, @priority(N) or None,
    match, value), as p4c places them for BMv2 (P4_16 specification, "Entries", then p4c's BMv2
    back end): each without a priority takes the one before it less `delta` (more with
    largest_priority_wins = false), the first none if none has one; sorted winner first and
    numbered from 1 but where @priority says. Gives (BMv2 priority, where BMv2 lists it, match,
    value); BMv2's smaller priority wins."""
    p4, current = [], 0
    for explicit, _, _, _ in entries:
        if explicit is not None:
            current = explicit
        p4.append(current)
        current = current - delta if largest_wins else current + delta
    order = sorted(range(len(entries)), key=lambda i: -p4[i] if largest_wins else p4[i])
    placed = []
    for rank, i in enumerate(order):
        _, annotated, match, value = entries[i]
        placed.append((annotated if annotated is not None else rank + 1, rank, match, value))
    return placed


def ternary(value, mask):
    """A ternary match."""
    return lambda x: x & mask == value & mask


ANY = ternary(0, 0)


def lookup(placed, key, default):
    """The value of the entry of `placed` that wins for `key` (one value per key), or `default`."""
    hits = [(p, pos, v) for p, pos, match, v in placed if all(m(k) for m, k in zip(match, key))]
    return min(hits)[2] if hits else default
