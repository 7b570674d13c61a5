//! Packet formats in user space: typed zero-copy views in the style of smoltcp's `wire`.
