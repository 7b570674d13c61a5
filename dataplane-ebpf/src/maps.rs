//! Every map the programs use: the `#[map]` statics of `dataplane_common::map_table!`, where
//! each map's name, kind, types and size are declared once for the programs and the loader.

/// Expands the table into a `#[map]` static per map, of the aya-ebpf type of its kind.
macro_rules! statics {
    ($($(#[$doc:meta])* $name:ident: $kind:ident<$key:ty, $value:ty>[$entries:expr];)*) => {
        $(statics!(@one $(#[$doc])* $name, $kind, $key, $value, $entries);)*
    };
    (@one $(#[$doc:meta])* $name:ident, Array, $key:ty, $value:ty, $entries:expr) => {
        $(#[$doc])*
        #[aya_ebpf::macros::map]
        pub static $name: aya_ebpf::maps::Array<$value> =
            aya_ebpf::maps::Array::with_max_entries($entries, 0);
    };
    (@one $(#[$doc:meta])* $name:ident, PerCpuArray, $key:ty, $value:ty, $entries:expr) => {
        $(#[$doc])*
        #[aya_ebpf::macros::map]
        pub static $name: aya_ebpf::maps::PerCpuArray<$value> =
            aya_ebpf::maps::PerCpuArray::with_max_entries($entries, 0);
    };
    (@one $(#[$doc:meta])* $name:ident, DevMap, $key:ty, $value:ty, $entries:expr) => {
        $(#[$doc])*
        #[aya_ebpf::macros::map]
        pub static $name: aya_ebpf::maps::DevMap =
            aya_ebpf::maps::DevMap::with_max_entries($entries, 0);
    };
    (@one $(#[$doc:meta])* $name:ident, $kind:ident, $key:ty, $value:ty, $entries:expr) => {
        // HashMap, LruHashMap, LpmTrie (which adds BPF_F_NO_PREALLOC itself).
        $(#[$doc])*
        #[aya_ebpf::macros::map]
        pub static $name: aya_ebpf::maps::$kind<$key, $value> =
            aya_ebpf::maps::$kind::with_max_entries($entries, 0);
    };
}

dataplane_common::map_table!(statics);

/// The value of `key` in the LRU hash `map`, made (as `V::default()`) if absent. Inserts with
/// `BPF_NOEXIST`, so an entry another CPU has just made (and maybe counted into) is kept, not
/// replaced.
#[inline(always)]
pub fn get_or_insert<V: Default>(
    map: &aya_ebpf::maps::LruHashMap<u32, V>,
    key: u32,
) -> Option<*mut V> {
    if let Some(value) = map.get_ptr_mut(key) {
        return Some(value);
    }
    let _ = map.insert(key, V::default(), aya_ebpf::bindings::BPF_NOEXIST as u64);
    map.get_ptr_mut(key)
}
