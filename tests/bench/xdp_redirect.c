// The forwarding baseline of `cargo xtask bench host`: redirect every frame to one interface,
// nothing else. Compiled with clang at benchmark time with -DUPLINK=<ifindex>.
#include <linux/bpf.h>

static long (*bpf_redirect)(__u32 ifindex, __u64 flags) = (void *)BPF_FUNC_redirect;

__attribute__((section("xdp"), used)) int xdp_redirect(struct xdp_md *ctx) {
    return bpf_redirect(UPLINK, 0);
}

char _license[] __attribute__((section("license"), used)) = "GPL";
