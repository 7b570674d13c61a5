// The sink of the traffic tool's ceiling in `cargo xtask bench host`: drops every frame in the
// driver, so the receiving side costs as little as it can and the sender alone sets the rate
// (veth counts the frames in rx_packets before the program drops them).
#include <linux/bpf.h>

__attribute__((section("xdp"), used)) int xdp_drop(struct xdp_md *ctx) { return XDP_DROP; }

char _license[] __attribute__((section("license"), used)) = "GPL";
