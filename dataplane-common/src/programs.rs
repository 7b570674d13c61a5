//! The programs of the eBPF object, by the names the loader finds them under. The eBPF crate
//! names each entry point so and checks it at build time with [`crate::entry_point_is!`]; the
//! control plane loads and attaches them by these constants, and a test of the `host` crate
//! checks that the built object holds exactly these programs.

/// ECN marking (and PFC receive) at XDP, on ingress.
pub const XDP: &str = "lossless_xdp";
/// ECN marking at TC egress.
pub const TC: &str = "lossless_tc";
/// TC ingress of the CNP fast path and PFC generation: answers CE marks, models the ingress
/// buffer, marks the clones `EMIT` turns into CNP and PFC frames.
pub const INGRESS: &str = "lossless_ingress";
/// TC egress, first: turns marked clones into CNP and PFC frames.
pub const EMIT: &str = "lossless_emit";
/// The load balancer at XDP.
pub const LB: &str = "lossless_lb";
/// ERSPAN mirroring at TC ingress: mirrors the selected frames that arrive.
pub const MIRROR_IN: &str = "lossless_mirror_in";
/// ERSPAN mirroring at TC egress, last: mirrors the selected frames that leave.
pub const MIRROR_OUT: &str = "lossless_mirror_out";

/// Every program of the object.
pub const ALL: [&str; 7] = [XDP, TC, INGRESS, EMIT, LB, MIRROR_IN, MIRROR_OUT];

/// Whether `a` and `b` are the same text (usable in constants, for [`crate::entry_point_is!`]).
pub const fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Fails the build unless the entry point `$function` is named as `$name` (one of
/// [`crate::programs`]' constants) says: `entry_point_is!(lossless_xdp, programs::XDP);`
/// beside the function.
#[macro_export]
macro_rules! entry_point_is {
    ($function:ident, $name:path) => {
        const _: () = {
            // The function itself, so the check stands beside the entry point it names.
            let _ = $function;
            assert!(
                $crate::programs::same(stringify!($function), $name),
                concat!(
                    "the entry point ",
                    stringify!($function),
                    " is not named as ",
                    stringify!($name),
                    " says"
                )
            );
        };
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_compares_whole_texts() {
        assert!(same(XDP, "lossless_xdp"));
        assert!(!same(XDP, "lossless_xd"));
        assert!(!same(TC, "lossless_tx"));
    }
}
