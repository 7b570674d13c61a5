// The baseline of `cargo xtask bench host`: the smallest XDP program, compiled with clang at
// benchmark time and attached with iproute2, independently of our own loader.
#include <linux/bpf.h>

__attribute__((section("xdp"), used)) int xdp_pass(struct xdp_md *ctx) { return XDP_PASS; }

char _license[] __attribute__((section("license"), used)) = "GPL";
