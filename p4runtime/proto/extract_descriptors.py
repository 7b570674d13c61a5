"""Collects the P4Runtime v1 and P4Info definitions as a FileDescriptorSet.

The official `p4runtime` Python package ships no .proto text, but each of its generated
`*_pb2.py` modules embeds its .proto file as a serialized FileDescriptorProto. This script reads
those bytes out of the modules' source (it imports no protobuf code), adds the files they
depend on from `googleapis-common-protos` (google/rpc/status, google/rpc/code) and from
`protobuf` (google/protobuf/any), and writes them, dependencies first, as one
google.protobuf.FileDescriptorSet.

Run by `cargo xtask codegen` with the test venv's python (which `cargo xtask setup` fills with
the pinned versions); usage: extract_descriptors.py OUTPUT.
"""

import ast
import importlib.util
import sys

# Dependencies before the files that import them.
MODULES = [
    "google.protobuf.any_pb2",
    "google.rpc.code_pb2",
    "google.rpc.status_pb2",
    "p4.config.v1.p4types_pb2",
    "p4.config.v1.p4info_pb2",
    "p4.v1.p4data_pb2",
    "p4.v1.p4runtime_pb2",
]


def serialized_file(module):
    """The FileDescriptorProto bytes a generated module passes to protobuf."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        sys.exit(f"extract_descriptors: module {module} not found (run `cargo xtask setup`)")
    with open(spec.origin, encoding="utf-8") as f:
        tree = ast.parse(f.read(), spec.origin)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        # Newer protoc: descriptor_pool.Default().AddSerializedFile(b'...')
        if isinstance(node.func, ast.Attribute) and node.func.attr == "AddSerializedFile":
            return ast.literal_eval(node.args[0])
        # Older protoc: descriptor.FileDescriptor(..., serialized_pb=b'...')
        for keyword in node.keywords:
            if keyword.arg == "serialized_pb":
                return ast.literal_eval(keyword.value)
    sys.exit(f"extract_descriptors: no serialized descriptor in {spec.origin}")


def varint(n):
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: extract_descriptors.py OUTPUT")
    out = bytearray()
    for module in MODULES:
        data = serialized_file(module)
        # FileDescriptorSet { repeated FileDescriptorProto file = 1; }: tag 0x0a, length, bytes.
        out += b"\x0a" + varint(len(data)) + data
    with open(sys.argv[1], "wb") as f:
        f.write(out)
    print(f"extract_descriptors: {len(MODULES)} files, {len(out)} bytes -> {sys.argv[1]}")


if __name__ == "__main__":
    main()
