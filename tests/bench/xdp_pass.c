// The baseline of `cargo xtask bench host`: the smallest XDP program, compiled with clang at
// benchmark time and attached with iproute2, independently of our own loader.
//
// Variants for the program-cost part, by defines: -DSLOW_STEPS=N is the deliberately slowed
// program, N steps of a bounded loop through a volatile stack slot (a load, an add and a store
// each) before the verdict, which the benchmark must see as a clear rise over the plain one;
// -DCALL_KTIME and -DCALL_PRANDOM add one call of bpf_ktime_get_ns or bpf_get_prandom_u32, the
// price of that helper on this machine.
#include <linux/bpf.h>

__attribute__((section("xdp"), used)) int xdp_pass(struct xdp_md *ctx) {
#ifdef SLOW_STEPS
    volatile __u32 sink = 0;
#pragma clang loop unroll(disable)
    for (__u32 i = 0; i < SLOW_STEPS; i++)
        sink += i;
#endif
#ifdef CALL_KTIME
    static __u64 (*ktime_get_ns)(void) = (void *)BPF_FUNC_ktime_get_ns;
    volatile __u64 now = ktime_get_ns();
#endif
#ifdef CALL_PRANDOM
    static __u32 (*get_prandom_u32)(void) = (void *)BPF_FUNC_get_prandom_u32;
    volatile __u32 random = get_prandom_u32();
#endif
    return XDP_PASS;
}

char _license[] __attribute__((section("license"), used)) = "GPL";
