//! Malformed programs never panic the front end: deterministic mutations (token deletion,
//! duplication and replacement) of every corpus program must each give `Ok` or a diagnostic.

use softswitch::source::SourceMap;
use std::path::Path;

/// Replacement tokens: operators, keywords and literals that often break invariants.
const TOKENS: [&str; 16] = [
    "1", "8w1", "(", ")", "{", "}", ";", ".", "true", "int", "bit<8>", "?", "_", "header", "<<",
    "==",
];

fn compiles_without_panic(src: &str) {
    let mut map = SourceMap::new();
    let f = map.add("m.p4", src);
    if let Err(d) = softswitch::compile(&mut map, f) {
        let rendered = d.render(&map);
        assert!(
            rendered.starts_with("m.p4:") || rendered.starts_with('<'),
            "{rendered}"
        );
    }
}

#[test]
fn mutated_corpus_programs_never_panic() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus");
    let mut seed: u32 = 0x2545_f491;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 17;
        seed ^= seed << 5;
        seed as usize
    };
    let mut programs: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "p4"))
        .collect();
    programs.sort();
    for path in programs {
        let src = std::fs::read_to_string(&path).unwrap();
        let words: Vec<&str> = src
            .split_inclusive(|c: char| c.is_whitespace() || "(){};,.<>".contains(c))
            .collect();
        for _ in 0..60 {
            let mut w = words.clone();
            let i = next() % w.len();
            match next() % 3 {
                0 => {
                    w.remove(i);
                }
                1 => w.insert(i, w[i]),
                _ => w[i] = TOKENS[next() % TOKENS.len()],
            }
            let mutated: String = w.concat();
            let result = std::panic::catch_unwind(|| compiles_without_panic(&mutated));
            assert!(
                result.is_ok(),
                "{} mutated at word {i} panics:\n{mutated}",
                path.display()
            );
        }
    }
}
