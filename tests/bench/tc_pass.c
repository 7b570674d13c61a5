// The TC baseline of the program-cost part of `cargo xtask bench host`: the smallest TC
// classifier (it lets every frame go on), compiled with clang at benchmark time, independently of
// our own loader.
#include <linux/bpf.h>
#include <linux/pkt_cls.h>

__attribute__((section("classifier"), used)) int tc_pass(struct __sk_buff *skb) { return TC_ACT_OK; }

char _license[] __attribute__((section("license"), used)) = "GPL";
