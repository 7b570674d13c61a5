# The frames stack_bounds.p4 and stack_elements.p4 take and give, shared by their generators: a
# 4-byte head, the header `one`, stacks s and t of 3 elements each (None for an invalid element,
# which the deparser leaves out), and a trailing 0xee; the values the generators start from.

ONE = (0x01, 0x02)
S = [(0x10, 0x11), (0x20, 0x21), (0x30, 0x31)]
T = [(0x40, 0x41), (0x50, 0x51), (0x60, 0x62)]


def wire(elems):
    """The bytes of the valid elements of `elems`, in order."""
    return b"".join(bytes(e) for e in elems if e is not None)


def frame(head, one, s, t):
    """The frame of `head` (4 bytes), `one` and stacks `s` and `t`."""
    return bytes(head) + wire([one]) + wire(s) + wire(t) + b"\xee"
