# Independent references the corpus generators share, written here from their definitions and
# not taken from softswitch: the Internet checksum (RFC 1071) and CRC-16/ARC.


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
