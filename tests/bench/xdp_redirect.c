// The forwarding baseline of `cargo xtask bench host`: spread frames over the same uplinks as
// the balancer by their UDP source port, and nothing else (no parsing beyond a fixed offset,
// no rewriting). Compiled with clang at benchmark time with -DUPLINK0=<ifindex> ... UPLINK2.
#include <linux/bpf.h>

static long (*bpf_redirect)(__u32 ifindex, __u64 flags) = (void *)BPF_FUNC_redirect;

/// Offset of the UDP source port in an untagged IPv4 frame without options.
#define SPORT 34

__attribute__((section("xdp"), used)) int xdp_redirect(struct xdp_md *ctx) {
    unsigned char *data = (unsigned char *)(long)ctx->data;
    unsigned char *end = (unsigned char *)(long)ctx->data_end;
    if (data + SPORT + 2 > end)
        return XDP_PASS;
    unsigned int port = (data[SPORT] << 8) | data[SPORT + 1];
    unsigned int uplinks[3] = {UPLINK0, UPLINK1, UPLINK2};
    return bpf_redirect(uplinks[port % 3], 0);
}

char _license[] __attribute__((section("license"), used)) = "GPL";
