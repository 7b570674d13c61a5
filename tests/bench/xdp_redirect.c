// The forwarding baseline of `cargo xtask bench host`: spread frames over the same uplinks as
// the balancer by their UDP source port and rewrite the MACs as the balancer does (so the sink
// treats both alike: frames for its own MAC, not dropped early as another host's), and nothing
// else (no parsing beyond a fixed offset, no lookups, no TTL, no counters). Compiled with clang
// at benchmark time with -DUPLINK0=<ifindex> ... UPLINK2 and -DMACS0='{dst..., src...}' ...
// MACS2 (next hop's MAC, then the uplink's).
#include <linux/bpf.h>

static long (*bpf_redirect)(__u32 ifindex, __u64 flags) = (void *)BPF_FUNC_redirect;

/// Offset of the UDP source port in an untagged IPv4 frame without options.
#define SPORT 34

/// Destination and source MAC of each uplink.
static const unsigned char macs[3][12] = {MACS0, MACS1, MACS2};

__attribute__((section("xdp"), used)) int xdp_redirect(struct xdp_md *ctx) {
    unsigned char *data = (unsigned char *)(long)ctx->data;
    unsigned char *end = (unsigned char *)(long)ctx->data_end;
    if (data + SPORT + 2 > end)
        return XDP_PASS;
    unsigned int port = (data[SPORT] << 8) | data[SPORT + 1];
    // Chosen by branches, not by indexing with the remainder: the verifier does not bound an
    // index that clang computes as port - (port / 3) * 3, and refuses the load.
    unsigned int slot = port % 3;
    const unsigned char *mac = slot == 0 ? macs[0] : slot == 1 ? macs[1] : macs[2];
    __builtin_memcpy(data, mac, 12);
    return bpf_redirect(slot == 0 ? UPLINK0 : slot == 1 ? UPLINK1 : UPLINK2, 0);
}

char _license[] __attribute__((section("license"), used)) = "GPL";
