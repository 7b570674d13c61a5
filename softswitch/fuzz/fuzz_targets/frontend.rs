//! Fuzzes the front end: any text compiles to a program or a diagnostic that renders; never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let mut map = softswitch::source::SourceMap::new();
        let file = map.add("fuzz.p4", text);
        if let Err(d) = softswitch::compile(&mut map, file) {
            let _ = d.render(&map);
        }
    }
});
